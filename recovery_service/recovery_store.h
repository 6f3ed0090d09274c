#pragma once

// recovery_service's view of payment.db: claim due SENDING rows under a
// lease, fail exhausted ones, archive old SENT rows, and the operator's
// queries and re-drives.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "shared/backoff.h"
#include "shared/outbox_table.h"
#include "shared/sqlite_util.h"

namespace outbox::recovery {

struct Claimed {
  std::vector<OutboxRow> to_publish;  // attempts already incremented, next_retry_at pushed
  std::vector<OutboxRow> exhausted;   // turned FAILED in the same transaction
};

struct ClaimPolicy {
  LinearBackoff backoff;
  int max_attempts = 10;
  // When set, the claim happens only if this holder still holds the lease
  // (checked inside the claim's transaction: a fence against a second
  // instance that took over).
  std::string lease_holder;
};

struct LeaseState {
  std::string holder;
  int64_t expires_at = 0;
};

struct OutboxCounts {
  int64_t sending = 0;
  int64_t sent = 0;
  int64_t failed = 0;
  int64_t archived = 0;
  int64_t oldest_sending_created_at = 0;  // 0 when none
};

struct MessagePage {
  std::vector<OutboxRow> rows;
  int64_t next_cursor = 0;
};

class RecoveryStore {
 public:
  static absl::StatusOr<std::unique_ptr<RecoveryStore>> Open(const std::string& path,
                                                             const DbOptions& options);

  // Claims up to `limit` SENDING rows due at `now_ms`, oldest due first,
  // through the (status, next_retry_at) index. In the same transaction each
  // row either gets attempts+1 and next_retry_at = now + backoff(attempts),
  // or, when it already had max_attempts publishes, becomes FAILED.
  // FAILED_PRECONDITION if policy.lease_holder no longer holds the lease.
  absl::StatusOr<Claimed> ClaimDue(int64_t now_ms, int limit, const ClaimPolicy& policy);

  // The query plan of the claim's SELECT (EXPLAIN QUERY PLAN), for benchmarks.
  std::string ExplainClaim();

  absl::Status RecordPublishError(const std::vector<std::string>& message_ids,
                                  const std::string& error, int64_t now_ms);

  // Takes or renews the lease when it is free, expired or already ours.
  absl::StatusOr<bool> TryAcquireLease(const std::string& holder, int64_t now_ms, int64_t ttl_ms);
  // Gives the lease up (expires it now) if we hold it.
  absl::Status ReleaseLease(const std::string& holder, int64_t now_ms);
  absl::StatusOr<LeaseState> Lease();

  // Moves up to `batch` SENT rows with sent_at < cutoff to outbox_archive.
  absl::StatusOr<int> ArchiveSent(int64_t cutoff_ms, int batch);

  // Operator API.
  absl::StatusOr<MessagePage> List(OutboxStatus status, int64_t after_id, int limit);
  absl::StatusOr<OutboxRow> Get(const std::string& message_id);
  // FAILED -> SENDING, attempts 0, due now. FAILED_PRECONDITION otherwise.
  absl::StatusOr<OutboxRow> Redrive(const std::string& message_id, int64_t now_ms);
  absl::StatusOr<int64_t> RedriveAllFailed(bool dry_run, int64_t now_ms);
  absl::StatusOr<OutboxCounts> Counts();
  absl::StatusOr<int64_t> CountSendingOlderThan(int64_t created_before_ms);

 private:
  explicit RecoveryStore(std::unique_ptr<SqliteFile> db) : db_(std::move(db)) {}

  std::unique_ptr<SqliteFile> db_;
};

}  // namespace outbox::recovery
