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
#include "shared/outbox/internal/operator_verbs.h"
#include "shared/postgres/pg_session.h"

namespace outbox {

class PgOperatorStore final : public OperatorVerbs {
 public:
  // `session` reaches a database with the outbox tables and outlives this.
  explicit PgOperatorStore(PgSession& session) : session_(session) {}
  // The same on a session of its own.
  explicit PgOperatorStore(std::unique_ptr<PgSession> session)
      : owned_session_(std::move(session)), session_(*owned_session_) {}

  absl::StatusOr<MessagePage> List(OutboxStatus status, int64_t after_id, int limit) override;
  absl::StatusOr<OutboxCounts> Counts() override;
  absl::StatusOr<int64_t> OldestSendingCreatedAt() override;
  absl::StatusOr<std::vector<HistoryEvent>> History(const std::string& message_id_or_biz_key,
                                                    OutboxMessage* row) override;
  absl::StatusOr<std::vector<AuditRecord>> Audit(int64_t before_id, int limit) override;
  void RegisterMetrics(MetricsRegistry& metrics, const Clock& clock) override;

 protected:
  // Rows are locked FOR UPDATE, several in id order.
  absl::Status InTransaction(
      const std::string& what,
      const std::function<absl::Status(OperatorTransaction&)>& body) override;

 private:
  const std::unique_ptr<PgSession> owned_session_;  // when it has one of its own
  PgSession& session_;
};

}  // namespace outbox
