// The operator's verbs on a producer's PostgreSQL database
// (pg_operator_store.h), statement for statement what OperatorStore does on
// a SQLite file.
#include "shared/postgres/internal/pg_operator_store.h"

#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/observability/log.h"
#include "shared/outbox/internal/failure.h"
#include "shared/outbox/internal/state_machine.h"
#include "shared/postgres/pg_outbox_table.h"

namespace outbox {
namespace {

// history.h's names of the operator's events (one table layout, whichever
// store wrote it).
constexpr char kEventRedriven[] = "redriven";
constexpr char kEventFailureSeen[] = "failure_acknowledged";

int64_t Int64(const PgResult& r, int row, int column) {
  int64_t v = 0;
  return absl::SimpleAtoi(r.Get(row, column), &v) ? v : 0;
}

absl::StatusOr<int64_t> OldestSending(PgConnection& conn) {
  ASSIGN_OR_RETURN(
      PgResult r,
      conn.Query("SELECT coalesce(min(created_at), 0) FROM outbox WHERE status = 'SENDING'"));
  return Int64(r, 0, 0);
}

absl::StatusOr<int64_t> AppendAudit(PgConnection& conn, const AuditRecord& r) {
  ASSIGN_OR_RETURN(
      PgResult id,
      conn.Query("INSERT INTO outbox_audit (at, actor, action, target, dry_run, rows, "
                 "outcome, reason) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) "
                 "RETURNING id",
                 {std::to_string(r.at), r.actor, r.action, r.target, r.dry_run ? "1" : "0",
                  std::to_string(r.rows), r.outcome, r.reason}));
  return Int64(id, 0, 0);
}

absl::Status UpdateAudit(PgConnection& conn, int64_t id, int64_t rows, const std::string& outcome) {
  return conn
      .Query("UPDATE outbox_audit SET rows = $1, outcome = $2 WHERE id = $3",
             {std::to_string(rows), outcome, std::to_string(id)})
      .status();
}

}  // namespace

absl::StatusOr<MessagePage> PgOperatorStore::List(OutboxStatus status, int64_t after_id,
                                                  int limit) {
  std::vector<OutboxMessage> rows;
  RETURN_IF_ERROR(session_.Transaction("list messages", [&](PgConnection& conn) {
    rows.clear();
    ASSIGN_OR_RETURN(PgResult r, conn.Query(absl::StrCat("SELECT ", kPgOutboxColumns,
                                                         " FROM outbox o WHERE o.status = $1 AND "
                                                         "o.id > $2 ORDER BY o.id LIMIT $3"),
                                            {std::string(StatusName(status)),
                                             std::to_string(after_id), std::to_string(limit + 1)}));
    for (int i = 0; i < r.rows(); ++i) rows.push_back(ReadPgOutboxRow(r, i));
    return absl::OkStatus();
  }));
  return MakePage(std::move(rows), limit, [](const OutboxMessage& r) { return r.id; });
}

absl::StatusOr<OutboxCounts> PgOperatorStore::Counts() {
  OutboxCounts counts;
  RETURN_IF_ERROR(session_.Transaction("count messages", [&](PgConnection& conn) -> absl::Status {
    counts = OutboxCounts{};
    ASSIGN_OR_RETURN(PgResult by_status,
                     conn.Query("SELECT status, count(*) FROM outbox GROUP BY status"));
    for (int i = 0; i < by_status.rows(); ++i) {
      const absl::string_view s = by_status.Get(i, 0);
      const int64_t n = Int64(by_status, i, 1);
      if (s == "SENDING") counts.sending = n;
      if (s == "SENT") counts.sent = n;
      if (s == "FAILED") counts.failed = n;
    }
    ASSIGN_OR_RETURN(counts.oldest_sending_created_at, OldestSending(conn));
    ASSIGN_OR_RETURN(PgResult archived, conn.Query("SELECT count(*) FROM outbox_archive"));
    counts.archived = Int64(archived, 0, 0);
    return absl::OkStatus();
  }));
  return counts;
}

absl::StatusOr<int64_t> PgOperatorStore::OldestSendingCreatedAt() {
  int64_t oldest = 0;
  RETURN_IF_ERROR(session_.Transaction("oldest sending", [&](PgConnection& conn) -> absl::Status {
    ASSIGN_OR_RETURN(oldest, OldestSending(conn));
    return absl::OkStatus();
  }));
  return oldest;
}

void PgOperatorStore::RegisterMetrics(MetricsRegistry& metrics, const Clock& clock) {
  RegisterRowMetrics(metrics, clock);
}

absl::Status PgOperatorStore::RecordAudit(const AuditRecord& audit) {
  absl::Status s = session_.Transaction(
      "record audit", [&](PgConnection& conn) { return AppendAudit(conn, audit).status(); });
  if (!s.ok()) {
    LogError("audit_not_recorded",
             {KV("actor", audit.actor), KV("action", audit.action), KV("target", audit.target),
              KV("outcome", audit.outcome), KV("error", s.message())});
  }
  return s;
}

void PgOperatorStore::AuditFailure(AuditRecord audit, const absl::Status& why) {
  audit.outcome = std::string(why.message());
  audit.rows = 0;
  // The action's own error is what the caller reports; a failure to record
  // it is logged by RecordAudit.
  RecordAudit(audit).IgnoreError();
}

absl::StatusOr<OutboxMessage> PgOperatorStore::ChangeOneRow(
    const std::string& message_id, int64_t now_ms, const AuditRecord& audit,
    const std::function<absl::Status(OutboxMessage&)>& change, const char* event,
    const std::string& detail) {
  OutboxMessage changed;
  absl::Status s = session_.Transaction(audit.action, [&](PgConnection& conn) -> absl::Status {
    ASSIGN_OR_RETURN(auto rows, LockPgOutboxRows(conn, {message_id}));
    auto row = rows.find(message_id);
    if (row == rows.end()) {
      return absl::NotFoundError(absl::StrCat("message '", message_id, "' not found"));
    }
    RETURN_IF_ERROR(change(row->second));
    RETURN_IF_ERROR(SavePgOutboxRow(conn, row->second));
    RETURN_IF_ERROR(AppendPgHistory(conn, message_id, now_ms, audit.actor, event, detail));
    AuditRecord done = audit;
    done.rows = 1;
    done.outcome = "ok";
    RETURN_IF_ERROR(AppendAudit(conn, done).status());
    changed = std::move(row->second);
    return absl::OkStatus();
  });
  if (!s.ok()) {
    AuditFailure(audit, s);
    return s;
  }
  return changed;
}

absl::StatusOr<OutboxMessage> PgOperatorStore::Redrive(const std::string& message_id,
                                                       int64_t now_ms, const std::string& actor,
                                                       const std::string& reason) {
  return ChangeOneRow(
      message_id, now_ms, {0, now_ms, actor, "redrive_message", message_id, false, 0, "", reason},
      [&](OutboxMessage& row) { return OnRedrive(row, now_ms); }, kEventRedriven,
      absl::StrCat("by ", actor));
}

absl::StatusOr<OutboxMessage> PgOperatorStore::AcknowledgeFailure(const std::string& message_id,
                                                                  int64_t now_ms,
                                                                  const std::string& actor,
                                                                  const std::string& reason) {
  return ChangeOneRow(
      message_id, now_ms,
      {0, now_ms, actor, "acknowledge_message", message_id, false, 0, "", reason},
      [&](OutboxMessage& row) { return OnAcknowledgeFailure(row, actor, now_ms); },
      kEventFailureSeen, absl::StrCat("by ", actor));
}

absl::StatusOr<int64_t> PgOperatorStore::ChangeFailedRows(
    const std::string& group, bool dry_run, int64_t now_ms, const AuditRecord& audit, int page,
    const std::function<bool(OutboxMessage&)>& change, const char* event,
    const std::string& detail) {
  if (page < 1) return absl::InvalidArgumentError("page must be at least 1");
  int64_t total = 0;
  int64_t audit_id = 0;
  int64_t after_id = 0;  // rows are walked by id: a changed row leaves the set or stays behind
  while (true) {
    // The body may run again (a serialization failure): what it learns
    // stays in these until the page commits.
    int64_t in_page = 0;
    int64_t page_after_id = after_id;
    int64_t page_audit_id = audit_id;
    bool last = false;
    absl::Status s = session_.Transaction(audit.action, [&](PgConnection& conn) -> absl::Status {
      in_page = 0;
      page_after_id = after_id;
      page_audit_id = audit_id;
      // Locked in id order, as every writer of several rows locks them.
      ASSIGN_OR_RETURN(
          PgResult r,
          conn.Query(
              absl::StrCat("SELECT ", kPgOutboxColumns,
                           " FROM outbox o WHERE o.status = 'FAILED' AND ",
                           group.empty() ? "" : "o.failure_group = $3 AND ",
                           "o.id > $1 ORDER BY o.id LIMIT $2 FOR UPDATE"),
              group.empty()
                  ? std::vector<PgParam>{std::to_string(after_id), std::to_string(page)}
                  : std::vector<PgParam>{std::to_string(after_id), std::to_string(page), group}));
      last = r.rows() < page;
      for (int i = 0; i < r.rows(); ++i) {
        OutboxMessage row = ReadPgOutboxRow(r, i);
        page_after_id = row.id;
        if (!change(row)) continue;
        ++in_page;
        if (dry_run) continue;
        RETURN_IF_ERROR(SavePgOutboxRow(conn, row));
        RETURN_IF_ERROR(AppendPgHistory(conn, row.message_id, now_ms, audit.actor, event, detail));
      }
      const std::string outcome = last ? "ok" : "in progress";
      if (page_audit_id == 0) {
        AuditRecord first = audit;
        first.rows = total + in_page;
        first.outcome = outcome;
        ASSIGN_OR_RETURN(page_audit_id, AppendAudit(conn, first));
        return absl::OkStatus();
      }
      return UpdateAudit(conn, page_audit_id, total + in_page, outcome);
    });
    if (!s.ok()) {
      // Nothing of the page committed, its audit record included: a first
      // page's failure is recorded on its own.
      if (audit_id == 0) {
        AuditFailure(audit, s);
      } else {
        absl::Status recorded = session_.Transaction("record audit", [&](PgConnection& conn) {
          return UpdateAudit(conn, audit_id, total,
                             absl::StrCat("stopped after ", total, " rows: ", s.message()));
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

absl::StatusOr<int64_t> PgOperatorStore::RedriveFailed(const std::string& group, bool dry_run,
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

absl::StatusOr<int64_t> PgOperatorStore::AcknowledgeGroup(const std::string& group, bool dry_run,
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

absl::StatusOr<std::vector<HistoryEvent>> PgOperatorStore::History(
    const std::string& message_id_or_biz_key, OutboxMessage* row) {
  std::vector<HistoryEvent> events;
  bool found = false;
  RETURN_IF_ERROR(session_.Transaction("read history", [&](PgConnection& conn) -> absl::Status {
    events.clear();
    found = false;
    for (const char* table : {"outbox", "outbox_archive"}) {
      ASSIGN_OR_RETURN(
          PgResult r,
          conn.Query(absl::StrCat("(SELECT ", kPgOutboxColumns, " FROM ", table,
                                  " o WHERE o.message_id = $1) UNION ALL (SELECT ",
                                  kPgOutboxColumns, " FROM ", table,
                                  " o WHERE o.biz_key = $1 AND o.message_id <> $1 LIMIT 1) "
                                  "LIMIT 1"),
                     {message_id_or_biz_key}));
      if (r.rows() > 0) {
        *row = ReadPgOutboxRow(r, 0);
        found = true;
        break;
      }
    }
    if (!found) return absl::OkStatus();
    ASSIGN_OR_RETURN(PgResult h,
                     conn.Query("SELECT id, message_id, at, instance, event, detail FROM "
                                "outbox_history WHERE message_id = $1 ORDER BY id",
                                {row->message_id}));
    for (int i = 0; i < h.rows(); ++i) {
      events.push_back({Int64(h, i, 0), std::string(h.Get(i, 1)), Int64(h, i, 2),
                        std::string(h.Get(i, 3)), std::string(h.Get(i, 4)),
                        std::string(h.Get(i, 5))});
    }
    return absl::OkStatus();
  }));
  if (!found) {
    return absl::NotFoundError(
        absl::StrCat("no message with id or business key '", message_id_or_biz_key, "'"));
  }
  return events;
}

absl::StatusOr<std::vector<AuditRecord>> PgOperatorStore::Audit(int64_t before_id, int limit) {
  std::vector<AuditRecord> records;
  RETURN_IF_ERROR(session_.Transaction("read audit", [&](PgConnection& conn) -> absl::Status {
    records.clear();
    ASSIGN_OR_RETURN(
        PgResult r,
        conn.Query("SELECT id, at, actor, action, target, dry_run, rows, outcome, reason "
                   "FROM outbox_audit WHERE id < $1 ORDER BY id DESC LIMIT $2",
                   {std::to_string(before_id > 0 ? before_id : std::numeric_limits<int64_t>::max()),
                    std::to_string(limit)}));
    for (int i = 0; i < r.rows(); ++i) {
      AuditRecord a;
      a.id = Int64(r, i, 0);
      a.at = Int64(r, i, 1);
      a.actor = std::string(r.Get(i, 2));
      a.action = std::string(r.Get(i, 3));
      a.target = std::string(r.Get(i, 4));
      a.dry_run = Int64(r, i, 5) != 0;
      a.rows = Int64(r, i, 6);
      a.outcome = std::string(r.Get(i, 7));
      a.reason = std::string(r.Get(i, 8));
      records.push_back(std::move(a));
    }
    return absl::OkStatus();
  }));
  return records;
}

}  // namespace outbox
