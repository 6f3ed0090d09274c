#pragma once

// The recovery loop: hold the lease, look at the watched queues, then either claim due
// rows in batches and re-publish them with confirms (rate-limited), failing
// exhausted rows with an alert, or — while nobody consumes the queue or it is
// far behind — hold them without spending attempts (or writing them) and
// raise one alert for the incident. Housekeeping archives old SENT rows,
// prunes the archive and the audit trail, and keeps the alerts for FAILED
// rows, the backlog and the dead-letter queues in step with what is true
// now, so every alert resolves when its cause is gone.
// Gives the lease up after repeated publish failures so another instance can
// try. Step() orchestrates; each concern is a part of its own.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "shared/base/clock.h"
#include "shared/observability/internal/alerts.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/internal/archiver.h"
#include "shared/outbox/internal/lease_keeper.h"
#include "shared/outbox/internal/recovery_alerts.h"
#include "shared/outbox/internal/recovery_options.h"
#include "shared/outbox/internal/republish_hold.h"
#include "shared/outbox/internal/republisher.h"
#include "shared/outbox/repository.h"
#include "shared/outbox/transport.h"
#include "shared/runtime/internal/worker_thread.h"

namespace outbox {

class RecoveryLoop {
 public:
  RecoveryLoop(RecoveryRepository& outbox, MessagePublisher& broker, AlertSink& alerts,
               const Clock& clock, MetricsRegistry& metrics, RecoveryOptions options);
  ~RecoveryLoop();

  // A task of the service's own for each housekeeping pass, run by the
  // lease holder before the alerts are refreshed (so they see its effect).
  // Before Start() only.
  void AddHousekeeping(std::function<void()> task) { housekeeping_.push_back(std::move(task)); }
  // How OutboxDeadLetters counts a dead-letter queue
  // (RecoveryAlerts::CountDeadLettersWith). Before Start() only.
  void CountDeadLettersWith(RecoveryAlerts::DeadLetterCount count) {
    alerts_.CountDeadLettersWith(std::move(count));
  }

  void Start();
  void Stop();  // finishes the round in hand and releases the lease

  // One turn: lease, housekeeping when due, one round (hold or re-publish),
  // and the idle wait when nothing was due. False once stopping (the lease is
  // then released). Tests call it directly.
  bool Step();

  // Readable from any thread (the ops API).
  bool lease_held() const { return lease_.held(); }
  int64_t republished() const { return republisher_.republished(); }
  int64_t publish_failures() const { return republisher_.publish_failures(); }
  int64_t failed() const { return republisher_.failed(); }
  int64_t deferred() const { return hold_.deferred(); }
  int64_t lease_yields() const { return lease_.yields(); }
  DeliveryHold hold() const { return hold_.current(); }
  QueueState last_queue() const { return hold_.last_queue(); }
  int64_t active_alerts() const { return active_alerts_.load(); }

 private:
  // Takes or renews the lease; false (after waiting as told) when not held.
  bool TakeLease(absl::Time now);
  // Another instance holds the lease: the hold and the alerts raised while
  // this one held it are theirs now.
  void StandDown();
  // Looks at the watched queues, then holds or re-publishes; returns how many rows it
  // re-published or failed (0: idle).
  int Round();
  // While acknowledgements are stalled: one probe row per first retry delay.
  int Probe();
  // Whether a reply queue has no consumer: the producer is away from the
  // broker (RecoveryOptions::reply_queues).
  bool ProducerAway();
  void Housekeeping();
  // Waits, polling the broker connection: rabbitmq-c only sends heartbeats
  // when the connection is used, and the broker drops a silent one.
  void IdleWait(absl::Duration d);
  void CountAlerts();
  // Counts a round that could not reach the broker and logs why (rate-limited).
  void NoteConnectFailure(const absl::Status& why);

  MessagePublisher& broker_;
  RecoveryRepository& outbox_;
  const Clock& clock_;
  const RecoveryOptions options_;
  // The policy of rows re-published while the producer is away: the
  // longest delay before the next (see RepublishHold).
  const RetryPolicy away_retry_;
  LeaseKeeper lease_;
  RecoveryAlerts alerts_;
  RepublishHold hold_;
  Republisher republisher_;
  Archiver archiver_;
  DurationHistogram& round_duration_;
  Counter& connect_failures_;
  std::string connect_error_;  // the last connect error logged; "" while connected
  absl::Time connect_error_logged_ = absl::InfinitePast();
  int64_t connect_failures_since_ = 0;
  std::atomic<int64_t> active_alerts_{0};
  int consecutive_failures_ = 0;
  absl::Time last_housekeeping_ = absl::InfinitePast();
  std::vector<std::function<void()>> housekeeping_;
  // The last retention pass stopped with more due: the next turn runs
  // another rather than waiting for the next housekeeping.
  bool retention_behind_ = false;
  absl::Time last_probe_ = absl::InfinitePast();
  WorkerThread thread_;
};

}  // namespace outbox
