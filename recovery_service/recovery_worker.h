#pragma once

// The recovery loop: hold the lease, claim due rows in batches, re-publish
// them with confirms (rate-limited), fail exhausted rows with an alert, alert
// once on a backlog, archive old SENT rows. Gives the lease up after repeated
// publish failures so another instance can try.
#include <atomic>
#include <string>

#include "recovery_service/rate_limiter.h"
#include "shared/base/clock.h"
#include "shared/observability/alerts.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/repository.h"
#include "shared/outbox/retry_policy.h"
#include "shared/outbox/transport.h"
#include "shared/runtime/worker_thread.h"

namespace outbox::recovery {

struct RecoveryOptions {
  std::string instance_id;  // lease holder name
  RetryPolicy retry;        // backoff of attempts 2..n (the budget is in each row)
  int batch = 200;
  double rate_per_second = 1000;
  absl::Duration lease_ttl = absl::Seconds(10);
  absl::Duration idle_sleep = absl::Seconds(1);
  absl::Duration confirm_timeout = absl::Seconds(5);
  int max_publish_failures = 3;  // rounds in a row before the lease is given up
  absl::Duration backlog_age = absl::Minutes(5);
  int64_t backlog_threshold = 1000;
  absl::Duration retention = absl::Hours(24 * 7);
  int archive_batch = 500;
  absl::Duration housekeeping_every = absl::Seconds(10);  // archive + backlog check

  absl::Status Validate() const;  // INVALID_ARGUMENT naming the bad setting
};

class RecoveryWorker {
 public:
  RecoveryWorker(RecoveryRepository& outbox, MessagePublisher& broker, AlertSink& alerts,
                 const Clock& clock, MetricsRegistry& metrics, RecoveryOptions options);
  ~RecoveryWorker();

  void Start();
  void Stop();  // finishes the round in hand and releases the lease

  // One turn: lease, housekeeping when due, one claim-and-publish round, and
  // the idle sleep when nothing was due. False once stopping (the lease is
  // then released). Tests call it directly.
  bool Step();

  bool lease_held() const { return lease_held_.load(); }
  int64_t republished() const { return republished_.value(); }
  int64_t publish_failures() const { return publish_failures_.value(); }
  int64_t failed() const { return failed_.value(); }
  int64_t lease_yields() const { return lease_yields_.value(); }

 private:
  // Takes or renews the lease; false when another instance holds it.
  bool HoldLease(absl::Time now);
  // One claim-and-publish round; returns how many rows it handled.
  int Round();
  void RaiseFailed(const OutboxMessage& row);
  void Housekeeping();

  RecoveryRepository& outbox_;
  MessagePublisher& broker_;
  AlertSink& alerts_;
  const Clock& clock_;
  const RecoveryOptions options_;
  RateLimiter limiter_;
  Counter& republished_;
  Counter& publish_failures_;
  Counter& failed_;
  Counter& archived_;
  Counter& lease_yields_;
  std::atomic<bool> lease_held_{false};
  int consecutive_failures_ = 0;
  absl::Time lease_renewed_ = absl::InfinitePast();
  absl::Time last_housekeeping_ = absl::InfinitePast();
  bool backlog_alerted_ = false;
  WorkerThread thread_;
};

}  // namespace outbox::recovery
