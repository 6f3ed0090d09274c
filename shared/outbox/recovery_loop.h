#pragma once

// The recovery loop: hold the lease, look at PAY_QUEUE, then either claim due
// rows in batches and re-publish them with confirms (rate-limited), failing
// exhausted rows with an alert, or — while nobody consumes the queue or it is
// far behind — hold them without spending attempts (or writing them) and
// raise one alert for the incident. Housekeeping archives old SENT rows and keeps the alerts for
// FAILED rows, the backlog and the dead-letter queues in step with what is
// true now, so every alert resolves when its cause is gone. Gives the lease
// up after repeated publish failures so another instance can try.
#include <atomic>
#include <string>
#include <vector>

#include "shared/base/clock.h"
#include "shared/observability/alert_group.h"
#include "shared/observability/alerts.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/rate_limiter.h"
#include "shared/outbox/repository.h"
#include "shared/outbox/retry_policy.h"
#include "shared/outbox/transport.h"
#include "shared/runtime/worker_thread.h"

namespace outbox {

struct RecoveryOptions {
  std::string instance_id;  // lease holder name
  RetryPolicy retry;        // backoff of attempts 2..n (the budget is in each row)
  std::string pay_queue = "PAY_QUEUE";  // looked at before each round
  // With accounting shards, the queues of pay_queue's group instead: their
  // ready messages add up, and one without a consumer holds every
  // re-publish, since which shard a payment hashes to is the broker's call.
  std::vector<std::string> pay_queue_shards;
  // Queues whose dead-letter queues are watched (an alert while not empty).
  std::vector<std::string> dead_letter_sources = {"PAY_QUEUE", "ACC_QUEUE"};
  // More ready messages than this in pay_queue: re-publishing holds, until
  // the queue is down to a tenth of it (see HoldFor).
  int64_t hold_queue_depth = 10000;
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
  absl::Duration housekeeping_every = absl::Seconds(10);  // archive + alerts in step
  absl::Duration alert_resend = absl::Minutes(1);         // active alerts re-sent this often

  absl::Status Validate() const;  // INVALID_ARGUMENT naming the bad setting
};

// Why re-publishing is held (none: it goes on).
enum class DeliveryHold { kNone = 0, kConsumerDown = 1, kQueueBacklog = 2 };
const char* DeliveryHoldName(DeliveryHold hold);  // "", "consumer_down", "queue_backlog"

// The decision, as a plain function: nobody consumes the queue, or it holds
// more than `max_ready` messages, so another copy would only wait there too.
// A hold in force (`current`) lasts until the queue is down to max_ready / 10:
// the copies still queued when consumers return are being delivered, and a
// row coming due meanwhile would only be sent a second time.
DeliveryHold HoldFor(const QueueState& queue, int64_t max_ready,
                     DeliveryHold current = DeliveryHold::kNone);

class RecoveryLoop {
 public:
  RecoveryLoop(RecoveryRepository& outbox, MessagePublisher& broker, AlertSink& alerts,
                 const Clock& clock, MetricsRegistry& metrics, RecoveryOptions options);
  ~RecoveryLoop();

  void Start();
  void Stop();  // finishes the round in hand and releases the lease

  // One turn: lease, housekeeping when due, one round (hold or re-publish),
  // and the idle wait when nothing was due. False once stopping (the lease is
  // then released). Tests call it directly.
  bool Step();

  // Readable from any thread (the ops API).
  bool lease_held() const { return lease_held_.load(); }
  int64_t republished() const { return republished_.value(); }
  int64_t publish_failures() const { return publish_failures_.value(); }
  int64_t failed() const { return failed_.value(); }
  int64_t deferred() const { return deferred_.value(); }
  int64_t lease_yields() const { return lease_yields_.value(); }
  DeliveryHold hold() const { return static_cast<DeliveryHold>(hold_.load()); }
  QueueState last_queue() const { return {queue_ready_.load(), queue_consumers_.load()}; }
  int64_t active_alerts() const { return active_alerts_.load(); }

 private:
  // Takes or renews the lease; false when another instance holds it.
  bool HoldLease(absl::Time now);
  // Looks at pay_queue, then holds or re-publishes; returns how many rows it
  // re-published or failed (0: idle).
  int Round();
  // Pushes every due row one backoff step (when a hold ends); returns how many.
  int64_t DeferAllDue();
  void UpdateHold(DeliveryHold hold, const QueueState& queue);
  int Republish();
  void RaiseFailed(const OutboxMessage& row);
  void Housekeeping();
  // Waits, polling the broker connection: rabbitmq-c only sends heartbeats
  // when the connection is used, and the broker drops a silent one.
  void IdleWait(absl::Duration d);
  void CountAlerts();

  RecoveryRepository& outbox_;
  MessagePublisher& broker_;
  const Clock& clock_;
  const RecoveryOptions options_;
  RateLimiter limiter_;
  Counter& republished_;
  Counter& publish_failures_;
  Counter& failed_;
  Counter& deferred_;
  Counter& archived_;
  Counter& lease_yields_;
  AlertGroup failed_alerts_;       // OutboxMessageFailed, one per FAILED row
  AlertGroup delivery_alert_;      // OutboxConsumerDown / OutboxQueueBacklog
  AlertGroup backlog_alert_;       // OutboxBacklog
  AlertGroup dead_letter_alerts_;  // OutboxDeadLetters, one per non-empty DLQ
  std::atomic<bool> lease_held_{false};
  std::atomic<int> hold_{0};
  std::atomic<int64_t> queue_ready_{0};
  std::atomic<int> queue_consumers_{0};
  std::atomic<int64_t> active_alerts_{0};
  int consecutive_failures_ = 0;
  absl::Time lease_renewed_ = absl::InfinitePast();
  absl::Time last_housekeeping_ = absl::InfinitePast();
  WorkerThread thread_;
};

}  // namespace outbox
