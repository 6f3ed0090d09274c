#pragma once

// The operator's view of a producer's PostgreSQL database
// (OperatorRepository, shared/outbox/internal/operator_repository.h), the
// counterpart of OperatorStore (shared/sqlite/internal/operator_store.h)
// with the same semantics, which one contract suite checks on both
// (shared/testing/operator_contract.h): listings and counts, re-drive and
// acknowledge (one row or a failure group), a message's history and the
// audit trail. Each change is audited in the transaction that makes it, and
// rows are changed locked FOR UPDATE, so an operator's change and a claim of
// recovery (PgRecoveryStore) on one row take turns. Thread-safe: calls take
// turns on one connection (PgSession). Its metrics are the rows' gauges
// only; the SQLite file's own have no counterpart here.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "shared/outbox/internal/operator_repository.h"
#include "shared/postgres/pg_session.h"

namespace outbox {

class PgOperatorStore final : public OperatorRepository {
 public:
  // `session` reaches a database with the outbox tables and outlives this.
  explicit PgOperatorStore(PgSession& session) : session_(session) {}
  // The same on a session of its own.
  explicit PgOperatorStore(std::unique_ptr<PgSession> session)
      : owned_session_(std::move(session)), session_(*owned_session_) {}

  absl::StatusOr<MessagePage> List(OutboxStatus status, int64_t after_id, int limit) override;
  absl::StatusOr<OutboxCounts> Counts() override;
  absl::StatusOr<int64_t> OldestSendingCreatedAt() override;
  absl::StatusOr<OutboxMessage> Redrive(const std::string& message_id, int64_t now_ms,
                                        const std::string& actor,
                                        const std::string& reason = "") override;
  absl::StatusOr<int64_t> RedriveFailed(const std::string& group, bool dry_run, int64_t now_ms,
                                        const std::string& actor, int page = 1000,
                                        bool include_rejected_and_acknowledged = false,
                                        const std::string& reason = "") override;
  absl::StatusOr<OutboxMessage> AcknowledgeFailure(const std::string& message_id, int64_t now_ms,
                                                   const std::string& actor,
                                                   const std::string& reason = "") override;
  absl::StatusOr<int64_t> AcknowledgeGroup(const std::string& group, bool dry_run, int64_t now_ms,
                                           const std::string& actor, int page = 1000,
                                           const std::string& reason = "") override;
  absl::StatusOr<std::vector<HistoryEvent>> History(const std::string& message_id_or_biz_key,
                                                    OutboxMessage* row) override;
  absl::Status RecordAudit(const AuditRecord& audit) override;
  absl::StatusOr<std::vector<AuditRecord>> Audit(int64_t before_id, int limit) override;
  // outbox_rows{status=...} and outbox_oldest_sending_age_seconds.
  void RegisterMetrics(MetricsRegistry& metrics, const Clock& clock) override;

 private:
  // Applies `change` (true: changed) to FAILED rows of `group` ("" = all),
  // `page` rows per transaction, with the audit record kept in step.
  absl::StatusOr<int64_t> ChangeFailedRows(const std::string& group, bool dry_run, int64_t now_ms,
                                           const AuditRecord& audit, int page,
                                           const std::function<bool(OutboxMessage&)>& change,
                                           const char* event, const std::string& detail);
  // One row's operator change, audited.
  absl::StatusOr<OutboxMessage> ChangeOneRow(
      const std::string& message_id, int64_t now_ms, const AuditRecord& audit,
      const std::function<absl::Status(OutboxMessage&)>& change, const char* event,
      const std::string& detail);
  // Records an action that failed, in a transaction of its own.
  void AuditFailure(AuditRecord audit, const absl::Status& why);

  const std::unique_ptr<PgSession> owned_session_;  // when it has one of its own
  PgSession& session_;
};

}  // namespace outbox
