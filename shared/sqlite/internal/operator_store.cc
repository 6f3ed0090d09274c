// The operator's verbs on a producer's file (operator_store.h): listings and
// counts; re-drive and acknowledge, one row or a failure group, each audited
// in the transaction of its change; a message's history and the audit trail.
#include "shared/sqlite/internal/operator_store.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/observability/log.h"
#include "shared/outbox/internal/failure.h"
#include "shared/outbox/internal/state_machine.h"
#include "shared/sqlite/internal/sqlite_metrics.h"
#include "shared/sqlite/outbox_table.h"

namespace outbox {
namespace {

std::string SelectWhere(const std::string& where) {
  return absl::StrCat("SELECT ", kOutboxColumns, " FROM outbox o ", where);
}

// SELECT kOutboxColumns of FAILED rows through the failure-group index,
// WHERE ... AND `condition`.
std::string SelectWhereFailed(const std::string& condition) {
  return absl::StrCat("SELECT ", kOutboxColumns, " FROM outbox o WHERE o.status = 'FAILED' AND ",
                      condition);
}

// created_at of the oldest SENDING row, 0 when none; throws.
int64_t OldestSending(SQLite::Database& reader) {
  SQLite::Statement oldest(reader, "SELECT MIN(created_at) FROM outbox WHERE status = 'SENDING'");
  if (oldest.executeStep() && !oldest.getColumn(0).isNull()) return oldest.getColumn(0).getInt64();
  return 0;
}

}  // namespace

OperatorStore::OperatorStore(RecoveryStore& recovery)
    : db_(*recovery.db_), metrics_label_(recovery.metrics_label_) {}

absl::StatusOr<MessagePage> OperatorStore::List(OutboxStatus status, int64_t after_id, int limit) {
  std::vector<OutboxMessage> rows;
  RETURN_IF_ERROR(db_.Read("list messages", [&](SQLite::Database& reader) {
    // SENT rows are nearly all rows: walk ids in order and stop after a page
    // (the unary + keeps SQLite from sorting every SENT row through the
    // status index). SENDING and FAILED rows are few: the index finds them.
    SQLite::Statement stmt(
        reader, SelectWhere(status == OutboxStatus::kSent
                                ? "WHERE +o.status = ?1 AND o.id > ?2 ORDER BY o.id LIMIT ?3"
                                : "WHERE o.status = ?1 AND o.id > ?2 ORDER BY o.id LIMIT ?3"));
    stmt.bind(1, std::string(StatusName(status)));
    stmt.bind(2, static_cast<int64_t>(after_id));
    stmt.bind(3, limit + 1);
    while (stmt.executeStep()) rows.push_back(ReadOutboxMessage(stmt));
    return absl::OkStatus();
  }));
  return MakePage(std::move(rows), limit, [](const OutboxMessage& r) { return r.id; });
}

absl::StatusOr<OutboxCounts> OperatorStore::Counts() {
  OutboxCounts counts;
  RETURN_IF_ERROR(db_.Read("count messages", [&](SQLite::Database& reader) {
    SQLite::Statement by_status(reader, "SELECT status, COUNT(*) FROM outbox GROUP BY status");
    while (by_status.executeStep()) {
      const std::string s = by_status.getColumn(0).getString();
      const int64_t n = by_status.getColumn(1).getInt64();
      if (s == "SENDING") counts.sending = n;
      if (s == "SENT") counts.sent = n;
      if (s == "FAILED") counts.failed = n;
    }
    counts.oldest_sending_created_at = OldestSending(reader);
    SQLite::Statement archived(reader, "SELECT COUNT(*) FROM outbox_archive");
    if (archived.executeStep()) counts.archived = archived.getColumn(0).getInt64();
    return absl::OkStatus();
  }));
  return counts;
}

absl::StatusOr<int64_t> OperatorStore::OldestSendingCreatedAt() {
  int64_t oldest = 0;
  RETURN_IF_ERROR(db_.Read("oldest sending", [&](SQLite::Database& reader) {
    oldest = OldestSending(reader);
    return absl::OkStatus();
  }));
  return oldest;
}

void OperatorStore::RegisterMetrics(MetricsRegistry& metrics, const Clock& clock) {
  RegisterSqliteFileMetrics(db_, metrics_label_, metrics);
  RegisterRowMetrics(metrics, clock);
}

absl::Status OperatorStore::RecordAudit(const AuditRecord& audit) {
  absl::Status s = db_.Write([&](SQLite::Database& writer) {
    AppendAudit(writer, audit);
    return absl::OkStatus();
  });
  if (!s.ok()) {
    LogError("audit_not_recorded",
             {KV("actor", audit.actor), KV("action", audit.action), KV("target", audit.target),
              KV("outcome", audit.outcome), KV("error", s.message())});
  }
  return s;
}

void OperatorStore::AuditFailure(AuditRecord audit, const absl::Status& why) {
  audit.outcome = std::string(why.message());
  audit.rows = 0;
  // The action's own error is what the caller reports; a failure to record
  // it is logged by RecordAudit.
  RecordAudit(audit).IgnoreError();
}

absl::StatusOr<OutboxMessage> OperatorStore::ChangeOneRow(
    const std::string& message_id, int64_t now_ms, const AuditRecord& audit,
    const std::function<absl::Status(OutboxMessage&)>& change, const char* event,
    const std::string& detail) {
  OutboxMessage changed;
  absl::Status s = db_.Write([&](SQLite::Database& db) -> absl::Status {
    OutboxStateTable table(db);
    std::optional<OutboxMessage> row = table.Load(message_id);
    if (!row.has_value()) {
      return absl::NotFoundError(absl::StrCat("message '", message_id, "' not found"));
    }
    RETURN_IF_ERROR(change(*row));
    table.Save(*row);
    HistoryLog(db).Append(message_id, now_ms, audit.actor, event, detail);
    AuditRecord done = audit;
    done.rows = 1;
    done.outcome = "ok";
    AppendAudit(db, done);
    changed = *std::move(row);
    return absl::OkStatus();
  });
  if (!s.ok()) {
    AuditFailure(audit, s);
    return s;
  }
  return changed;
}

absl::StatusOr<OutboxMessage> OperatorStore::Redrive(const std::string& message_id, int64_t now_ms,
                                                     const std::string& actor,
                                                     const std::string& reason) {
  return ChangeOneRow(
      message_id, now_ms, {0, now_ms, actor, "redrive_message", message_id, false, 0, "", reason},
      [&](OutboxMessage& row) { return OnRedrive(row, now_ms); }, kEventRedriven,
      absl::StrCat("by ", actor));
}

absl::StatusOr<OutboxMessage> OperatorStore::AcknowledgeFailure(const std::string& message_id,
                                                                int64_t now_ms,
                                                                const std::string& actor,
                                                                const std::string& reason) {
  return ChangeOneRow(
      message_id, now_ms,
      {0, now_ms, actor, "acknowledge_message", message_id, false, 0, "", reason},
      [&](OutboxMessage& row) { return OnAcknowledgeFailure(row, actor, now_ms); },
      kEventFailureSeen, absl::StrCat("by ", actor));
}

absl::StatusOr<int64_t> OperatorStore::ChangeFailedRows(
    const std::string& group, bool dry_run, int64_t now_ms, const AuditRecord& audit, int page,
    const std::function<bool(OutboxMessage&)>& change, const char* event,
    const std::string& detail) {
  if (page < 1) return absl::InvalidArgumentError("page must be at least 1");
  int64_t total = 0;
  int64_t audit_id = 0;
  int64_t after_id = 0;  // rows are walked by id: a changed row leaves the set or stays behind
  while (true) {
    // The body may run again (a busy database): what it learns stays in
    // these until the page commits.
    int64_t in_page = 0;
    int64_t page_after_id = after_id;
    int64_t page_audit_id = audit_id;
    bool last = false;
    absl::Status s = db_.Write([&](SQLite::Database& db) -> absl::Status {
      in_page = 0;
      page_after_id = after_id;
      page_audit_id = audit_id;
      SQLite::Statement select(
          db, SelectWhereFailed(group.empty() ? "o.id > ?1 ORDER BY o.id LIMIT ?2"
                                              : "o.failure_group = ?3 AND o.id > ?1 "
                                                "ORDER BY o.id LIMIT ?2"));
      select.bind(1, static_cast<int64_t>(after_id));
      select.bind(2, page);
      if (!group.empty()) select.bind(3, group);
      std::vector<OutboxMessage> rows;
      while (select.executeStep()) rows.push_back(ReadOutboxMessage(select));
      last = static_cast<int>(rows.size()) < page;
      OutboxStateTable table(db);
      std::optional<HistoryLog> history;
      for (OutboxMessage& row : rows) {
        page_after_id = row.id;
        if (!change(row)) continue;
        ++in_page;
        if (dry_run) continue;
        table.Save(row);
        if (!history) history.emplace(db);
        history->Append(row.message_id, now_ms, audit.actor, event, detail);
      }
      const std::string outcome = last ? "ok" : "in progress";
      if (page_audit_id == 0) {
        AuditRecord first = audit;
        first.rows = total + in_page;
        first.outcome = outcome;
        page_audit_id = AppendAudit(db, first);
      } else {
        UpdateAudit(db, page_audit_id, total + in_page, outcome);
      }
      return absl::OkStatus();
    });
    if (!s.ok()) {
      // Nothing of the page committed, its audit record included: a first
      // page's failure is recorded on its own.
      if (audit_id == 0) {
        AuditFailure(audit, s);
      } else {
        absl::Status recorded = db_.Write([&](SQLite::Database& writer) {
          UpdateAudit(writer, audit_id, total,
                      absl::StrCat("stopped after ", total, " rows: ", s.message()));
          return absl::OkStatus();
        });
        if (!recorded.ok()) {
          LogError("audit_not_recorded", {KV("actor", audit.actor), KV("action", audit.action),
                                          KV("target", audit.target), KV("outcome", s.message()),
                                          KV("error", recorded.message())});
        }
      }
      return s;
    }
    after_id = page_after_id;
    audit_id = page_audit_id;
    total += in_page;
    if (last) return total;
  }
}

absl::StatusOr<int64_t> OperatorStore::RedriveFailed(const std::string& group, bool dry_run,
                                                     int64_t now_ms, const std::string& actor,
                                                     int page,
                                                     bool include_rejected_and_acknowledged,
                                                     const std::string& reason) {
  const bool everything = !group.empty() || include_rejected_and_acknowledged;
  const AuditRecord audit{0,
                          now_ms,
                          actor,
                          group.empty() ? "redrive_all" : "redrive_group",
                          !group.empty() ? group
                          : include_rejected_and_acknowledged
                              ? "FAILED (rejected and acknowledged too)"
                              : "FAILED",
                          dry_run,
                          0,
                          "",
                          reason};
  return ChangeFailedRows(
      group, dry_run, now_ms, audit, page,
      [&](OutboxMessage& row) {
        if (!everything && (row.failure_kind == kFailureRejected || !row.acknowledged_by.empty())) {
          return false;  // left FAILED on purpose
        }
        return OnRedrive(row, now_ms).ok();
      },
      kEventRedriven,
      absl::StrCat("by ", actor, group.empty() ? " (all FAILED)" : " (group " + group + ")"));
}

absl::StatusOr<int64_t> OperatorStore::AcknowledgeGroup(const std::string& group, bool dry_run,
                                                        int64_t now_ms, const std::string& actor,
                                                        int page, const std::string& reason) {
  if (group.empty()) return absl::InvalidArgumentError("a failure group is required");
  const AuditRecord audit{0, now_ms, actor, "acknowledge_group", group, dry_run, 0, "", reason};
  return ChangeFailedRows(
      group, dry_run, now_ms, audit, page,
      [&](OutboxMessage& row) {
        return row.acknowledged_by.empty() && OnAcknowledgeFailure(row, actor, now_ms).ok();
      },
      kEventFailureSeen, absl::StrCat("by ", actor, " (group ", group, ")"));
}

absl::StatusOr<std::vector<HistoryEvent>> OperatorStore::History(
    const std::string& message_id_or_biz_key, OutboxMessage* row) {
  std::vector<HistoryEvent> events;
  bool found = false;
  RETURN_IF_ERROR(db_.Read("read history", [&](SQLite::Database& reader) {
    for (const char* table : {"outbox", "outbox_archive"}) {
      SQLite::Statement stmt(
          reader,
          absl::StrCat("SELECT ", kOutboxColumns, " FROM ", table,
                       " o WHERE o.message_id = ?1 UNION ALL SELECT ", kOutboxColumns, " FROM ",
                       table, " o WHERE o.biz_key = ?1 AND o.message_id != ?1 LIMIT 1"));
      stmt.bind(1, message_id_or_biz_key);
      if (stmt.executeStep()) {
        *row = ReadOutboxMessage(stmt);
        found = true;
        break;
      }
    }
    if (found) events = ReadHistory(reader, row->message_id);
    return absl::OkStatus();
  }));
  if (!found) {
    return absl::NotFoundError(
        absl::StrCat("no message with id or business key '", message_id_or_biz_key, "'"));
  }
  return events;
}

absl::StatusOr<std::vector<AuditRecord>> OperatorStore::Audit(int64_t before_id, int limit) {
  std::vector<AuditRecord> records;
  RETURN_IF_ERROR(db_.Read("read audit", [&](SQLite::Database& reader) {
    records = ListAudit(reader, before_id, limit);
    return absl::OkStatus();
  }));
  return records;
}

}  // namespace outbox
