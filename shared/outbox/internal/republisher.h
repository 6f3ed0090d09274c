#pragma once

// One re-publish round of the recovery loop: claim due rows under the lease
// (rate-limited), publish them as stored with confirms, and note on the rows
// what the broker did not confirm. Rows whose attempt budget is spent turn
// FAILED in the claim and raise OutboxMessageFailed.
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "shared/base/clock.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/internal/lease_keeper.h"
#include "shared/outbox/internal/rate_limiter.h"
#include "shared/outbox/internal/recovery_alerts.h"
#include "shared/outbox/internal/recovery_options.h"
#include "shared/outbox/repository.h"
#include "shared/outbox/transport.h"

namespace outbox {

class Republisher {
 public:
  Republisher(RecoveryRepository& outbox, MessagePublisher& broker, LeaseKeeper& lease,
              RecoveryAlerts& alerts, const Clock& clock, MetricsRegistry& metrics,
              RecoveryOptions options);

  struct Round {
    int handled = 0;  // rows re-published or failed (0: nothing was due)
    // The rate allows nothing now: wait this long (handled is 1 then: work
    // may be waiting).
    absl::Duration throttled = absl::ZeroDuration();
    // Whether the broker confirmed the batch (kNone: nothing was published).
    enum class Publish { kNone, kConfirmed, kFailed } publish = Publish::kNone;
  };
  // Claims at most `max_rows` (0: a whole batch, --recovery_batch), with
  // `retry` in place of the options' policy when given.
  Round Run(int max_rows = 0, const RetryPolicy* retry = nullptr);

  int64_t republished() const { return republished_.value(); }
  int64_t publish_failures() const { return publish_failures_.value(); }
  int64_t failed() const { return failed_.value(); }

 private:
  // Claims up to `limit` due rows; an error is logged (a lost lease noted).
  absl::StatusOr<Claimed> Claim(int limit, int64_t now_ms, const RetryPolicy& retry);
  void RaiseFailed(const OutboxMessage& row);
  // Warns (once per topic and budget) when a claimed row's stored attempt
  // budget is not the one recovery's policy gives its topic: the producer
  // that wrote it runs with another RetryPolicy.
  void NoteBudget(const OutboxMessage& row);
  // Publishes the claimed rows with confirms; returns the ids the broker
  // did not confirm (noted on their rows).
  std::vector<std::string> Publish(const std::vector<OutboxMessage>& rows, int64_t now_ms);
  void NoteFailures(const std::vector<std::string>& failed, const std::string& error,
                    int64_t now_ms);
  void LogRows(const std::vector<OutboxMessage>& rows, const std::vector<bool>& confirmed,
               size_t failed) const;

  RecoveryRepository& outbox_;
  MessagePublisher& broker_;
  LeaseKeeper& lease_;
  RecoveryAlerts& alerts_;
  const Clock& clock_;
  const RecoveryOptions options_;
  RateLimiter limiter_;
  Counter& republished_;
  Counter& publish_failures_;
  Counter& failed_;
  Counter& note_failures_;
  std::set<std::pair<std::string, int>> budgets_noted_;  // (topic, max_attempts) warned about
};

}  // namespace outbox
