#pragma once

// The operator's view of a producer's SQLite database, over the file a
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
#include "shared/outbox/message.h"
#include "shared/sqlite/internal/audit.h"
#include "shared/sqlite/internal/history.h"
#include "shared/sqlite/internal/recovery_store.h"
#include "shared/sqlite/sqlite_file.h"

namespace outbox {

struct OutboxCounts {
  int64_t sending = 0;
  int64_t sent = 0;
  int64_t failed = 0;
  int64_t archived = 0;
  int64_t oldest_sending_created_at = 0;  // 0 when none
};

using MessagePage = Page<OutboxMessage>;

class OperatorStore {
 public:
  // Works on the file `recovery` opened, which must outlive it: one file,
  // one writer connection, for the loop and the operator alike.
  explicit OperatorStore(RecoveryStore& recovery);

  absl::StatusOr<MessagePage> List(OutboxStatus status, int64_t after_id, int limit);
  absl::StatusOr<OutboxCounts> Counts();
  // created_at of the oldest SENDING row, 0 when there is none (through the
  // status index: cheaper than Counts()).
  absl::StatusOr<int64_t> OldestSendingCreatedAt();

  // Operator actions. Each records itself in outbox_audit under `actor`
  // with the operator's `reason` (may be empty), in the transaction of its
  // change (a paged one updates its record in each page's), and each changed
  // row gets a history event; an action that fails is recorded with its
  // error.
  // OnRedrive: FAILED -> SENDING, attempts 0, due now. FAILED_PRECONDITION otherwise.
  absl::StatusOr<OutboxMessage> Redrive(const std::string& message_id, int64_t now_ms,
                                        const std::string& actor, const std::string& reason = "");
  // The FAILED rows of one failure group or, with `group` empty, every
  // FAILED row but those left FAILED on purpose: rejected by the consumer
  // (their owners were told "never applied") or acknowledged by an operator;
  // `include_rejected_and_acknowledged` takes those too. In transactions of
  // `page` rows; dry_run only counts them (and is audited).
  absl::StatusOr<int64_t> RedriveFailed(const std::string& group, bool dry_run, int64_t now_ms,
                                        const std::string& actor, int page = 1000,
                                        bool include_rejected_and_acknowledged = false,
                                        const std::string& reason = "");
  // OnAcknowledgeFailure: the row stays FAILED and stops alerting.
  absl::StatusOr<OutboxMessage> AcknowledgeFailure(const std::string& message_id, int64_t now_ms,
                                                   const std::string& actor,
                                                   const std::string& reason = "");
  // The same for every not yet acknowledged row of a group, paged.
  absl::StatusOr<int64_t> AcknowledgeGroup(const std::string& group, bool dry_run, int64_t now_ms,
                                           const std::string& actor, int page = 1000,
                                           const std::string& reason = "");
  // The message's history (history.h), oldest first: by message id, or by
  // business key when no message has that id. NOT_FOUND when neither is
  // known. `row` gets the message's row (outbox, else outbox_archive).
  absl::StatusOr<std::vector<HistoryEvent>> History(const std::string& message_id_or_biz_key,
                                                    OutboxMessage* row);
  // Records an operator action that changed no row of the file (a dead
  // letter re-drive) in the audit trail.
  absl::Status RecordAudit(const AuditRecord& audit);
  // Records that the dead-letter sweep (dead_letter_sweep.h) removed a
  // settled copy of `message_id` at `at_ms`: actor "recovery", action
  // "remove_settled_dead_letter". Logged when it fails.
  absl::Status RecordSettledDeadLetterRemoved(const std::string& message_id, int64_t at_ms);
  // The audit trail, newest first, below `before_id` (0: from the newest).
  absl::StatusOr<std::vector<AuditRecord>> Audit(int64_t before_id, int limit);

  // The file's SQLite metrics (under the ProducerDb's metrics_label),
  // outbox_rows{status=...}, read from Counts() when scraped, and
  // outbox_oldest_sending_age_seconds (0 when nothing is SENDING), by `clock`.
  void RegisterMetrics(MetricsRegistry& metrics, const Clock& clock);

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
