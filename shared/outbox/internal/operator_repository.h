#pragma once

// The operator's verbs on a producer's database, whichever store keeps it
// (OperatorStore on SQLite, shared/sqlite/internal/operator_store.h;
// PgOperatorStore on PostgreSQL, shared/postgres/internal/pg_operator_store.h):
// listings and counts, re-drive and acknowledge (one row or a failure
// group), a message's history and the audit trail. Each change is audited
// in the transaction that makes it, and each changed row gets a history
// event. One contract suite runs on both (operator_contract.h).
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/base/clock.h"
#include "shared/base/internal/page.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/message.h"

namespace outbox {

// A record of the audit trail: every operator action that changed rows (re-drive
// one, a group or all; acknowledge; repair), and every one that tried and
// failed, with who, when, what, how many rows, the outcome and the reason.
struct AuditRecord {
  int64_t id = 0;
  int64_t at = 0;      // unix ms
  std::string actor;   // the bearer token's name, the client certificate's subject, ...
  std::string action;  // "redrive_message", "redrive_group", "redrive_all",
                       // "acknowledge_message", "acknowledge_group", "repair",
                       // "redrive_dead_letters", "remove_settled_dead_letter" (actor
                       // "recovery": its housekeeping)
  std::string target;  // a message id, a failure group, "FAILED", ...
  bool dry_run = false;
  int64_t rows = 0;     // rows changed (or that would be, dry run)
  std::string outcome;  // "ok", "in progress" (a paged change not finished) or the error
  std::string reason;   // why, in the operator's words ("" when none was given)
};

// An event of a message's history (outbox_history; the events are named in
// shared/sqlite/internal/history.h).
struct HistoryEvent {
  int64_t id = 0;
  std::string message_id;
  int64_t at = 0;        // unix ms
  std::string instance;  // the process or operator that did it
  std::string event;
  std::string detail;
};

struct OutboxCounts {
  int64_t sending = 0;
  int64_t sent = 0;
  int64_t failed = 0;
  int64_t archived = 0;
  int64_t oldest_sending_created_at = 0;  // 0 when none
};

using MessagePage = Page<OutboxMessage>;

class OperatorRepository {
 public:
  virtual ~OperatorRepository() = default;

  // Rows of one status in id order, after `after_id`, `limit` per page.
  virtual absl::StatusOr<MessagePage> List(OutboxStatus status, int64_t after_id, int limit) = 0;
  virtual absl::StatusOr<OutboxCounts> Counts() = 0;
  // created_at of the oldest SENDING row, 0 when there is none (through the
  // status index: cheaper than Counts()).
  virtual absl::StatusOr<int64_t> OldestSendingCreatedAt() = 0;

  // Operator actions. Each records itself in outbox_audit under `actor`
  // with the operator's `reason` (may be empty), in the transaction of its
  // change (a paged one updates its record in each page's), and each changed
  // row gets a history event; an action that fails is recorded with its
  // error.
  // OnRedrive: FAILED -> SENDING, attempts 0, due now. FAILED_PRECONDITION
  // otherwise, NOT_FOUND for an unknown id.
  virtual absl::StatusOr<OutboxMessage> Redrive(const std::string& message_id, int64_t now_ms,
                                                const std::string& actor,
                                                const std::string& reason = "") = 0;
  // The FAILED rows of one failure group or, with `group` empty, every
  // FAILED row but those left FAILED on purpose: rejected by the consumer
  // (their owners were told "never applied") or acknowledged by an operator;
  // `include_rejected_and_acknowledged` takes those too. In transactions of
  // `page` rows; dry_run only counts them (and is audited).
  virtual absl::StatusOr<int64_t> RedriveFailed(const std::string& group, bool dry_run,
                                                int64_t now_ms, const std::string& actor,
                                                int page = 1000,
                                                bool include_rejected_and_acknowledged = false,
                                                const std::string& reason = "") = 0;
  // OnAcknowledgeFailure: the row stays FAILED and stops alerting.
  virtual absl::StatusOr<OutboxMessage> AcknowledgeFailure(const std::string& message_id,
                                                           int64_t now_ms, const std::string& actor,
                                                           const std::string& reason = "") = 0;
  // The same for every not yet acknowledged row of a group, paged.
  virtual absl::StatusOr<int64_t> AcknowledgeGroup(const std::string& group, bool dry_run,
                                                   int64_t now_ms, const std::string& actor,
                                                   int page = 1000,
                                                   const std::string& reason = "") = 0;
  // The message's history, oldest first: by message id, or by business key
  // when no message has that id. NOT_FOUND when neither is known. `row`
  // gets the message's row (outbox, else outbox_archive).
  virtual absl::StatusOr<std::vector<HistoryEvent>> History(
      const std::string& message_id_or_biz_key, OutboxMessage* row) = 0;
  // Records an operator action that changed no row (a dead letter
  // re-drive) in the audit trail; logged when it fails.
  virtual absl::Status RecordAudit(const AuditRecord& audit) = 0;
  // Records that the dead-letter sweep (dead_letter_sweep.h) removed a
  // settled copy of `message_id` at `at_ms`: actor "recovery", action
  // "remove_settled_dead_letter". Logged when it fails.
  absl::Status RecordSettledDeadLetterRemoved(const std::string& message_id, int64_t at_ms) {
    return RecordAudit(AuditRecord{0, at_ms, "recovery", "remove_settled_dead_letter", message_id,
                                   false, 1, "ok"});
  }
  // The audit trail, newest first, below `before_id` (0: from the newest).
  virtual absl::StatusOr<std::vector<AuditRecord>> Audit(int64_t before_id, int limit) = 0;

  // outbox_rows{status=...}, read from Counts() when scraped, and
  // outbox_oldest_sending_age_seconds (0 when nothing is SENDING), by
  // `clock`; and the store's own metrics (SQLite: the file's).
  virtual void RegisterMetrics(MetricsRegistry& metrics, const Clock& clock) = 0;

 protected:
  // The two gauges every store registers (RegisterMetrics).
  void RegisterRowMetrics(MetricsRegistry& metrics, const Clock& clock);
};

inline void OperatorRepository::RegisterRowMetrics(MetricsRegistry& metrics, const Clock& clock) {
  metrics.AddGaugeFamily("outbox_rows", "outbox rows by status", [this] {
    std::vector<MetricsRegistry::Sample> out;
    if (auto c = Counts(); c.ok()) {
      out = {{{{"status", "SENDING"}}, static_cast<double>(c->sending)},
             {{{"status", "SENT"}}, static_cast<double>(c->sent)},
             {{{"status", "FAILED"}}, static_cast<double>(c->failed)},
             {{{"status", "ARCHIVED"}}, static_cast<double>(c->archived)}};
    }
    return out;
  });
  // Its own query rather than a second Counts() per scrape: outbox_rows
  // already runs that one, and it scans the table.
  metrics.AddGauge("outbox_oldest_sending_age_seconds",
                   "age of the oldest SENDING row (0 when none)", {}, [this, &clock] {
                     auto oldest = OldestSendingCreatedAt();
                     if (!oldest.ok() || *oldest == 0) return 0.0;
                     const double age = (clock.NowMillis() - *oldest) / 1000.0;
                     return age > 0 ? age : 0.0;
                   });
}

}  // namespace outbox
