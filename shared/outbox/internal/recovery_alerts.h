#pragma once

// The alerts about the outbox rows and the dead-letter queues that the
// active recovery instance owns: FAILED rows (OutboxMessageFailed), an old
// SENDING backlog (OutboxBacklog) and each non-empty dead-letter queue
// (OutboxDeadLetters). Each family is an AlertGroup set to what is true now,
// so an alert whose cause is gone (a late acknowledgement, a re-drive, a
// drained DLQ) resolves with the same labels. The delivery hold's alert is
// republish_hold.h's.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "shared/base/clock.h"
#include "shared/observability/internal/alert_group.h"
#include "shared/observability/internal/alerts.h"
#include "shared/outbox/internal/recovery_options.h"
#include "shared/outbox/repository.h"
#include "shared/outbox/transport.h"

namespace outbox {

// What OutboxMessageFailed says of a FAILED row.
Alert FailedAlert(const OutboxMessage& row, const RecoveryOptions& options);
// What OutboxMessagesRejected says of a failure group of rejected rows: one
// alert per reject reason, however many rows share it.
Alert RejectedAlert(const FailureGroup& group);

class RecoveryAlerts {
 public:
  RecoveryAlerts(AlertSink& sink, const Clock& clock, RecoveryOptions options);

  // The messages parked in a dead-letter source's DLQ (the source queue's
  // name given); NOT_FOUND while that DLQ does not exist.
  using DeadLetterCount = std::function<absl::StatusOr<int64_t>(const std::string& queue)>;
  // OutboxDeadLetters counts with `count` instead of a passive declare on
  // the broker Refresh is given. The recovery role gives DeadLetters::Count,
  // which counts under the queue's lock: a DLQ another process is looking
  // at is not empty, and an alert is not resolved on its count. Before the
  // first Refresh.
  void CountDeadLettersWith(DeadLetterCount count) { count_dead_letters_ = std::move(count); }

  // A row the claim just turned FAILED: its alert is raised now.
  void MessageFailed(const OutboxMessage& row);

  // Sets each family from the store and the broker. A family whose source
  // cannot be read is left as it is.
  void Refresh(RecoveryRepository& outbox, MessagePublisher& broker);

  size_t active() const;
  // Another instance holds the lease and owns these alerts now: dropped
  // without a resolve (AlertGroup::Forget); returns how many.
  size_t Forget();

 private:
  void RefreshBacklog(RecoveryRepository& outbox);
  void RefreshFailed(RecoveryRepository& outbox);
  void RefreshRejected(RecoveryRepository& outbox);
  void RefreshDeadLetters(MessagePublisher& broker);

  const Clock& clock_;
  const RecoveryOptions options_;
  AlertGroup failed_;        // OutboxMessageFailed, one per FAILED row
  AlertGroup backlog_;       // OutboxBacklog
  AlertGroup dead_letters_;  // OutboxDeadLetters, one per non-empty DLQ
  AlertGroup rejected_;      // OutboxMessagesRejected, one per reject group

  DeadLetterCount count_dead_letters_;  // empty: the broker's passive declare
};

}  // namespace outbox
