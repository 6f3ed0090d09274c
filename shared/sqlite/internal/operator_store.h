#pragma once

// The operator's view of a producer's SQLite database (OperatorRepository,
// shared/outbox/internal/operator_repository.h), over the file a
// RecoveryStore opened: listings and counts, re-drive and acknowledge (one
// row or a failure group), a message's history and the audit trail, and the
// file's metrics. Each change is audited in the transaction that makes it.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include "absl/status/statusor.h"
#include "shared/base/clock.h"
#include "shared/base/internal/page.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/internal/operator_repository.h"
#include "shared/outbox/message.h"
#include "shared/sqlite/internal/audit.h"
#include "shared/sqlite/internal/history.h"
#include "shared/sqlite/internal/recovery_store.h"
#include "shared/sqlite/sqlite_file.h"

namespace outbox {

class OperatorStore final : public OperatorRepository {
 public:
  // Works on the file `recovery` opened, which must outlive it: one file,
  // one writer connection, for the loop and the operator alike.
  explicit OperatorStore(RecoveryStore& recovery);

  // The verbs as OperatorRepository describes them.
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
  // The history as history.h keeps it.
  absl::StatusOr<std::vector<HistoryEvent>> History(const std::string& message_id_or_biz_key,
                                                    OutboxMessage* row) override;
  absl::Status RecordAudit(const AuditRecord& audit) override;
  absl::StatusOr<std::vector<AuditRecord>> Audit(int64_t before_id, int limit) override;

  // The file's SQLite metrics (under the ProducerDb's metrics_label),
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

  SqliteFile& db_;
  const std::string metrics_label_;
};

}  // namespace outbox
