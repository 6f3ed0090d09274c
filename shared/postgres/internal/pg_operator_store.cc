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
#include "shared/postgres/pg_outbox_table.h"

namespace outbox {
namespace {

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

class PgOperatorTransaction final : public OperatorTransaction {
 public:
  explicit PgOperatorTransaction(PgConnection& conn) : conn_(conn) {}

  absl::StatusOr<std::optional<OutboxMessage>> Load(const std::string& message_id) override {
    ASSIGN_OR_RETURN(auto rows, LockPgOutboxRows(conn_, {message_id}));
    auto row = rows.find(message_id);
    if (row == rows.end()) return std::optional<OutboxMessage>();
    return std::optional<OutboxMessage>(std::move(row->second));
  }
  absl::StatusOr<std::vector<OutboxMessage>> FailedRows(const std::string& group, int64_t after_id,
                                                        int limit) override {
    // Locked in id order, as every writer of several rows locks them.
    ASSIGN_OR_RETURN(
        PgResult r,
        conn_.Query(
            absl::StrCat("SELECT ", kPgOutboxColumns,
                         " FROM outbox o WHERE o.status = 'FAILED' AND ",
                         group.empty() ? "" : "o.failure_group = $3 AND ",
                         "o.id > $1 ORDER BY o.id LIMIT $2 FOR UPDATE"),
            group.empty()
                ? std::vector<PgParam>{std::to_string(after_id), std::to_string(limit)}
                : std::vector<PgParam>{std::to_string(after_id), std::to_string(limit), group}));
    std::vector<OutboxMessage> rows;
    for (int i = 0; i < r.rows(); ++i) rows.push_back(ReadPgOutboxRow(r, i));
    return rows;
  }
  absl::Status Save(const OutboxMessage& row) override { return SavePgOutboxRow(conn_, row); }
  absl::Status AppendHistory(const std::string& message_id, int64_t at_ms,
                             const std::string& instance, const char* event,
                             const std::string& detail) override {
    return AppendPgHistory(conn_, message_id, at_ms, instance, event, detail);
  }
  absl::StatusOr<int64_t> AppendAudit(const AuditRecord& audit) override {
    ASSIGN_OR_RETURN(
        PgResult id,
        conn_.Query(
            "INSERT INTO outbox_audit (at, actor, action, target, dry_run, rows, "
            "outcome, reason) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) "
            "RETURNING id",
            {std::to_string(audit.at), audit.actor, audit.action, audit.target,
             audit.dry_run ? "1" : "0", std::to_string(audit.rows), audit.outcome, audit.reason}));
    return Int64(id, 0, 0);
  }
  absl::Status UpdateAudit(int64_t id, int64_t rows, const std::string& outcome) override {
    return conn_
        .Query("UPDATE outbox_audit SET rows = $1, outcome = $2 WHERE id = $3",
               {std::to_string(rows), outcome, std::to_string(id)})
        .status();
  }

 private:
  PgConnection& conn_;
};

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

absl::Status PgOperatorStore::InTransaction(
    const std::string& what, const std::function<absl::Status(OperatorTransaction&)>& body) {
  return session_.Transaction(what, [&](PgConnection& conn) {
    PgOperatorTransaction tx(conn);
    return body(tx);
  });
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
