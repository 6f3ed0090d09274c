#pragma once

// Recovery's view of a producer's PostgreSQL database (RecoveryRepository),
// the counterpart of RecoveryStore (shared/sqlite/internal/recovery_store.h): claim
// due SENDING rows under the lease, fail exhausted ones, archive old SENT
// rows, retention, and the queries recovery's loop and alerts make. Claims
// lock their rows FOR UPDATE SKIP LOCKED, so several recovery processes on
// one database (each claiming without the lease, or a holder and a process
// that lost it mid-claim) never claim one row twice. Thread-safe: calls
// take turns on one connection (PgSession).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "shared/outbox/internal/due_rows.h"
#include "shared/outbox/repository.h"
#include "shared/postgres/pg_outbox_table.h"
#include "shared/postgres/pg_session.h"

namespace outbox {

class PgRecoveryStore final : public RecoveryRepository {
 public:
  // `session` reaches a database with the outbox tables and outlives this.
  explicit PgRecoveryStore(PgSession& session) : session_(session) {}
  // The same on a session of its own.
  explicit PgRecoveryStore(std::unique_ptr<PgSession> session)
      : owned_session_(std::move(session)), session_(*owned_session_) {}

  absl::StatusOr<OutboxMessage> Get(const std::string& message_id) override;
  absl::StatusOr<Claimed> ClaimDue(int64_t now_ms, int limit, const std::string& lease_holder,
                                   const RetryPolicy& policy) override;
  absl::StatusOr<int> DeferDue(int64_t now_ms, int limit, const std::string& lease_holder,
                               const RetryPolicy& policy) override;
  absl::StatusOr<std::vector<OutboxMessage>> ListFailed(int limit) override;
  absl::StatusOr<std::vector<FailureGroup>> FailureGroups(int limit,
                                                          const std::string& kind) override;
  absl::Status RecordPublishFailure(const std::vector<std::string>& message_ids,
                                    const std::string& error, int64_t now_ms) override;
  absl::StatusOr<bool> TryAcquireLease(const std::string& holder, int64_t now_ms,
                                       int64_t ttl_ms) override;
  // Gives the lease up (expires it now) if we hold it.
  absl::Status ReleaseLease(const std::string& holder, int64_t now_ms) override;
  absl::StatusOr<LeaseState> Lease() override;
  absl::StatusOr<int> ArchiveSent(int64_t cutoff_ms, int batch) override;
  absl::StatusOr<int> PruneArchive(int64_t cutoff_ms, int batch) override;
  absl::StatusOr<int> PruneAudit(int64_t cutoff_ms, int batch) override;
  absl::StatusOr<int64_t> CountSendingOlderThan(int64_t created_before_ms) override;
  absl::StatusOr<AckProgress> ReadAckProgress() override;

  // Who the history names for recovery's own events (its instance id).
  void set_instance(std::string instance) { instance_ = std::move(instance); }
  // The adopter's step when ClaimDue turns a row FAILED, in the claim's
  // transaction (PgRowClosed); set before the loop runs.
  void set_on_closed(PgRowClosed on_closed) { on_closed_ = std::move(on_closed); }

 private:
  // Runs a claim's transaction (due_rows.h): the lease row locked FOR
  // SHARE, so it cannot change hands before the commit; due rows locked
  // SKIP LOCKED, so rows another transaction holds are left to the next claim.
  DueRowsRunner DueRows();
  // Deletes up to `batch` rows of `table` whose `column` is below
  // `cutoff_ms`, oldest first, with the table's watermark in outbox_retention.
  absl::StatusOr<int> PruneOlderThan(const char* table, const char* column, int64_t cutoff_ms,
                                     int batch);

  const std::unique_ptr<PgSession> owned_session_;  // when it has one of its own
  PgSession& session_;
  std::string instance_ = "recovery";
  PgRowClosed on_closed_;
};

}  // namespace outbox
