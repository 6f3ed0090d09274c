#pragma once

// The storage seam: what the workers need from the outbox table. The SQLite
// adapters are SqliteOutbox (sqlite_outbox.h) for the producer and
// RecoveryStore (recovery_store.h) for recovery; shared/testing has an
// in-memory fake.
// Implementations apply the transitions of state_machine.h: Record<Event>
// applies On<Event> (OnAck, OnPublishFailure) to each row it names, durably.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/message.h"
#include "shared/outbox/retry_policy.h"

namespace outbox {

// What a batch of acknowledgements changed.
struct AckTally {
  int closed = 0;  // SENDING -> SENT
  int late = 0;    // FAILED -> SENT: delivered after all
  int changed() const { return closed + late; }
  // For each row turned SENT (closed or late): its created_at to the
  // acknowledgement's time stamp, in ms.
  std::vector<int64_t> create_to_sent_ms;
};

// A consumer's business reject: it will never process the message.
struct Rejection {
  std::string message_id;
  std::string reason;
  int64_t answered_at = 0;  // Acknowledgement::answered_at (OnReject)
};

// The delivery side: the relay notes failed publishes, the acknowledgement
// listener closes rows. Both stamp the time themselves.
class OutboxRepository {
 public:
  virtual ~OutboxRepository() = default;
  // Applies OnAck to each message durably. Unknown ids change nothing (a
  // reply for another shard or a replay).
  virtual absl::StatusOr<AckTally> RecordAcks(const std::vector<std::string>& message_ids) = 0;
  // Applies OnReject to each message durably (FAILED, kind "rejected", at
  // once); returns how many rows changed. Unknown ids change nothing, nor
  // does a reject made before the row's last restart.
  virtual absl::StatusOr<int> RecordRejects(const std::vector<Rejection>& rejects) = 0;
  // Applies OnPublishFailure to each message.
  virtual absl::Status RecordPublishFailure(const std::vector<std::string>& message_ids,
                                            const std::string& error) = 0;
  // Of these messages, those recovery has re-published since they were
  // written, or that are closed: a late fast-path copy of them would only be
  // a duplicate.
  virtual absl::StatusOr<std::vector<std::string>> TakenOver(
      const std::vector<std::string>& message_ids) = 0;
};

// Takes rows whose commit is done and publishes them now (the fast path).
class RelayQueue {
 public:
  virtual ~RelayQueue() = default;
  // Never blocks; what cannot be taken stays SENDING for recovery.
  // `written_at` is the time the rows' first retry counts from (the `now`
  // their transaction stamped): a commit that took long has used up part of
  // the time before recovery may take them over.
  virtual void Enqueue(std::vector<OutgoingMessage> messages, absl::Time written_at) = 0;
  // Rows written just now.
  void Enqueue(std::vector<OutgoingMessage> messages) {
    Enqueue(std::move(messages), absl::InfiniteFuture());
  }
};

struct Claimed {
  std::vector<OutboxMessage> to_publish;  // OnDue said kRepublish; stored
  std::vector<OutboxMessage> exhausted;   // OnDue said kExhausted; stored FAILED
};

// Whether acknowledgements are flowing, as the outbox table shows it.
struct AckProgress {
  int64_t last_acked_at = 0;           // newest sent_at of a SENT row, unix ms; 0 = none
  int64_t first_due_at = 0;            // earliest next_retry_at of a SENDING row; 0 = none
  int64_t first_due_published_at = 0;  // that row's last_attempt_at: its last publish
};

// FAILED rows that fail the same way (failure.h).
struct FailureGroup {
  std::string group;  // FailureGroupOf(topic, kind, error)
  std::string topic;
  std::string kind;
  std::string pattern;  // FailurePattern of the example's error
  int64_t count = 0;
  int64_t acknowledged = 0;  // of those, acknowledged by an operator
  int64_t first_seen = 0;    // unix ms: the oldest row's failure (its updated_at)
  int64_t last_seen = 0;
  std::string example_message_id;  // the newest row's
  std::string example_error;
};

struct LeaseState {
  std::string holder;
  int64_t expires_at = 0;  // unix ms
};

// The recovery side: claim due rows under a lease, note failures, retention.
class RecoveryRepository {
 public:
  virtual ~RecoveryRepository() = default;
  // The row with this message id; NOT_FOUND when there is none (never
  // written, or archived).
  virtual absl::StatusOr<OutboxMessage> Get(const std::string& message_id) = 0;
  // Claims up to `limit` due SENDING rows, oldest due first, and applies
  // OnDue to each in the same transaction. FAILED_PRECONDITION when
  // `lease_holder` (if not empty) no longer holds the lease at `now_ms`.
  virtual absl::StatusOr<Claimed> ClaimDue(int64_t now_ms, int limit,
                                           const std::string& lease_holder,
                                           const RetryPolicy& policy) = 0;
  // Applies OnHold to up to `limit` due SENDING rows (same fence as
  // ClaimDue): they wait another backoff step and keep their attempts;
  // those whose last publish failed stay due. Returns how many were pushed
  // back.
  virtual absl::StatusOr<int> DeferDue(int64_t now_ms, int limit, const std::string& lease_holder,
                                       const RetryPolicy& policy) = 0;
  // FAILED rows that alert one by one, oldest first, at most `limit`: not
  // rejected (those alert by failure group) and not acknowledged by an
  // operator. Their alerts are kept in step with this list.
  virtual absl::StatusOr<std::vector<OutboxMessage>> ListFailed(int limit) = 0;
  // Groups of FAILED rows (failure.h), at most `limit`: those with the most
  // rows not acknowledged first, then the largest, so that acknowledged
  // groups never crowd out one that needs attention; `kind` not empty: only
  // rows of that failure kind. Acknowledged rows are counted in
  // `acknowledged` as well.
  virtual absl::StatusOr<std::vector<FailureGroup>> FailureGroups(int limit,
                                                                  const std::string& kind) = 0;
  virtual absl::Status RecordPublishFailure(const std::vector<std::string>& message_ids,
                                            const std::string& error, int64_t now_ms) = 0;
  // Takes or renews the lease when it is free, expired or already ours.
  virtual absl::StatusOr<bool> TryAcquireLease(const std::string& holder, int64_t now_ms,
                                               int64_t ttl_ms) = 0;
  virtual absl::Status ReleaseLease(const std::string& holder, int64_t now_ms) = 0;
  virtual absl::StatusOr<LeaseState> Lease() = 0;
  // Moves up to `batch` SENT rows acknowledged before `cutoff_ms` to the archive.
  virtual absl::StatusOr<int> ArchiveSent(int64_t cutoff_ms, int batch) = 0;
  // Deletes up to `batch` archived rows acknowledged (sent_at) before
  // `cutoff_ms`, oldest first, and raises the archive's watermark to
  // `cutoff_ms` in the same transaction: a business key whose row is gone
  // and that is older than the watermark was pruned, not lost. Returns how
  // many; with none that old nothing is written.
  virtual absl::StatusOr<int> PruneArchive(int64_t cutoff_ms, int batch) = 0;
  // The same for the operators' audit trail: records made (at) before
  // `cutoff_ms`, with a watermark of its own.
  virtual absl::StatusOr<int> PruneAudit(int64_t cutoff_ms, int batch) = 0;
  virtual absl::StatusOr<int64_t> CountSendingOlderThan(int64_t created_before_ms) = 0;
  // Two index lookups: the newest acknowledgement and the earliest due row.
  virtual absl::StatusOr<AckProgress> ReadAckProgress() = 0;
};

// A consumer's processed message ids (its inbox), as far as pruning them
// goes (ProcessedPruner, inbox_pruner.h).
class ProcessedLog {
 public:
  virtual ~ProcessedLog() = default;
  // Deletes up to `limit` ids processed before `cutoff_ms`, oldest first, in
  // one transaction; returns how many. With none that old the write lock is
  // not taken.
  virtual absl::StatusOr<int> PruneProcessed(int64_t cutoff_ms, int limit) = 0;
};

// outbox_store_write_failures_total{write=...}: writes a worker could not
// make and gave up on (each logged where it failed), for writes whose loss
// costs nothing lasting: a failure note or a lease release. Registered here
// only so every worker shares one help text.
Counter& StoreWriteFailures(MetricsRegistry& metrics, const std::string& write);

}  // namespace outbox
