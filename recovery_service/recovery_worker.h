#pragma once

// The recovery loop: hold the lease, claim due rows in batches, re-publish
// them with confirms (rate-limited), fail exhausted rows with an alert, alert
// once on a backlog, archive old SENT rows. Gives the lease up after repeated
// publish failures so another instance can try.
#include <atomic>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "recovery_service/rate_limiter.h"
#include "recovery_service/recovery_store.h"
#include "shared/alerts.h"
#include "shared/amqp_session.h"
#include "shared/clock.h"

namespace outbox::recovery {

struct RecoveryOptions {
  std::string instance_id;  // lease holder name
  ClaimPolicy policy;       // backoff and max attempts (holder is filled in)
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
  std::string reply_to = "ACC_QUEUE";
};

struct RecoveryStats {
  std::atomic<int64_t> republished{0};
  std::atomic<int64_t> publish_failures{0};
  std::atomic<int64_t> failed{0};
  std::atomic<int64_t> archived{0};
  std::atomic<int64_t> lease_yields{0};
  std::atomic<bool> lease_held{false};
};

class RecoveryWorker {
 public:
  RecoveryWorker(RecoveryStore& store, AlertSink& alerts, const Clock& clock, const AmqpUrl& url,
                 const Topology& topology, RecoveryOptions options);
  ~RecoveryWorker();

  void Start();
  void Stop();  // finishes the round in hand and releases the lease

  const RecoveryStats& stats() const { return stats_; }

 private:
  void Run();
  // One claim-and-publish round; returns how many rows it handled.
  int Round(AmqpConnection& conn);
  void Housekeeping();
  bool Sleep(absl::Duration d) { return stop_.WaitForNotificationWithTimeout(d); }

  RecoveryStore& store_;
  AlertSink& alerts_;
  const Clock& clock_;
  RecoveryOptions options_;
  AmqpSession session_;
  RateLimiter limiter_;
  RecoveryStats stats_;
  int consecutive_failures_ = 0;
  absl::Time lease_renewed_ = absl::InfinitePast();
  absl::Time last_housekeeping_ = absl::InfinitePast();
  bool backlog_alerted_ = false;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace outbox::recovery
