// The operator's verbs on a producer's file (operator_store.h): listings and
// counts; re-drive and acknowledge, one row or a failure group, each audited
// in the transaction of its change; a message's history and the audit trail.
#include "shared/sqlite/internal/operator_store.h"

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
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

// An operator's transaction on the writer: its statements throw, which
// rolls the transaction back (SqliteFile::Write).
class SqliteOperatorTransaction final : public OperatorTransaction {
 public:
  explicit SqliteOperatorTransaction(SQLite::Database& db) : db_(db) {}

  absl::StatusOr<std::optional<OutboxMessage>> Load(const std::string& message_id) override {
    return Table().Load(message_id);
  }
  absl::StatusOr<std::vector<OutboxMessage>> FailedRows(const std::string& group, int64_t after_id,
                                                        int limit) override {
    SQLite::Statement select(db_,
                             SelectWhereFailed(group.empty() ? "o.id > ?1 ORDER BY o.id LIMIT ?2"
                                                             : "o.failure_group = ?3 AND o.id > ?1 "
                                                               "ORDER BY o.id LIMIT ?2"));
    select.bind(1, static_cast<int64_t>(after_id));
    select.bind(2, limit);
    if (!group.empty()) select.bind(3, group);
    std::vector<OutboxMessage> rows;
    while (select.executeStep()) rows.push_back(ReadOutboxMessage(select));
    return rows;
  }
  absl::Status Save(const OutboxMessage& row) override {
    Table().Save(row);
    return absl::OkStatus();
  }
  absl::Status AppendHistory(const std::string& message_id, int64_t at_ms,
                             const std::string& instance, const char* event,
                             const std::string& detail) override {
    if (!history_) history_.emplace(db_);
    history_->Append(message_id, at_ms, instance, event, detail);
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> AppendAudit(const AuditRecord& audit) override {
    return outbox::AppendAudit(db_, audit);
  }
  absl::Status UpdateAudit(int64_t id, int64_t rows, const std::string& outcome) override {
    outbox::UpdateAudit(db_, id, rows, outcome);
    return absl::OkStatus();
  }

 private:
  OutboxStateTable& Table() {
    if (!table_) table_.emplace(db_);
    return *table_;
  }

  SQLite::Database& db_;
  std::optional<OutboxStateTable> table_;
  std::optional<HistoryLog> history_;
};

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

absl::Status OperatorStore::InTransaction(
    const std::string& /*what*/, const std::function<absl::Status(OperatorTransaction&)>& body) {
  return db_.Write([&](SQLite::Database& db) {
    SqliteOperatorTransaction tx(db);
    return body(tx);
  });
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
