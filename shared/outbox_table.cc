#include "shared/outbox_table.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace outbox {

const char* const kOutboxColumns =
    "o.id, o.message_id, o.biz_type, o.biz_key, o.topic, o.payload, o.status, o.attempts, "
    "o.max_attempts, o.next_retry_at, o.last_attempt_at, o.last_error, o.created_at, "
    "o.updated_at, o.sent_at";

absl::string_view StatusName(OutboxStatus status) {
  switch (status) {
    case OutboxStatus::kSending: return "SENDING";
    case OutboxStatus::kSent: return "SENT";
    case OutboxStatus::kFailed: return "FAILED";
  }
  return "SENDING";
}

absl::StatusOr<OutboxStatus> ParseStatus(absl::string_view name) {
  if (name == "SENDING") return OutboxStatus::kSending;
  if (name == "SENT") return OutboxStatus::kSent;
  if (name == "FAILED") return OutboxStatus::kFailed;
  return absl::InvalidArgumentError(absl::StrCat("unknown outbox status '", name, "'"));
}

void CreateOutboxSchema(SQLite::Database& db) {
  db.exec(R"sql(
    CREATE TABLE IF NOT EXISTS outbox (
      id              INTEGER PRIMARY KEY,
      message_id      TEXT    NOT NULL UNIQUE,
      biz_type        TEXT    NOT NULL,
      biz_key         TEXT    NOT NULL,
      topic           TEXT    NOT NULL,
      payload         BLOB    NOT NULL,
      status          TEXT    NOT NULL CHECK (status IN ('SENDING', 'SENT', 'FAILED')),
      attempts        INTEGER NOT NULL DEFAULT 0,
      max_attempts    INTEGER NOT NULL,
      next_retry_at   INTEGER NOT NULL,
      last_attempt_at INTEGER NOT NULL DEFAULT 0,
      last_error      TEXT    NOT NULL DEFAULT '',
      created_at      INTEGER NOT NULL,
      updated_at      INTEGER NOT NULL,
      sent_at         INTEGER NOT NULL DEFAULT 0,
      UNIQUE (biz_type, biz_key)
    );
    CREATE INDEX IF NOT EXISTS outbox_status_next_retry ON outbox (status, next_retry_at);
    -- Retention walks SENT rows by age without touching the rest.
    CREATE INDEX IF NOT EXISTS outbox_sent_at ON outbox (sent_at) WHERE status = 'SENT';
    -- Archived SENT rows, same columns, moved here in small batches.
    CREATE TABLE IF NOT EXISTS outbox_archive AS SELECT * FROM outbox WHERE 0;
    CREATE TABLE IF NOT EXISTS recovery_lease (
      name       TEXT PRIMARY KEY,
      holder     TEXT    NOT NULL,
      expires_at INTEGER NOT NULL
    );
  )sql");
}

OutboxInserter::OutboxInserter(SQLite::Database& db)
    : stmt_(db, R"sql(
        INSERT INTO outbox (message_id, biz_type, biz_key, topic, payload, status, attempts,
                            max_attempts, next_retry_at, last_attempt_at, last_error,
                            created_at, updated_at, sent_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?))sql") {}

void InsertOutboxRow(SQLite::Database& db, const OutboxRow& row) { OutboxInserter(db).Insert(row); }

void OutboxInserter::Insert(const OutboxRow& row) {
  SQLite::Statement& stmt = stmt_;
  stmt.tryReset();  // after a failed insert reset() would rethrow its error
  stmt.clearBindings();
  stmt.bind(1, row.message_id);
  stmt.bind(2, row.biz_type);
  stmt.bind(3, row.biz_key);
  stmt.bind(4, row.topic);
  stmt.bind(5, row.payload.data(), static_cast<int>(row.payload.size()));
  stmt.bind(6, std::string(StatusName(row.status)));
  stmt.bind(7, row.attempts);
  stmt.bind(8, row.max_attempts);
  stmt.bind(9, static_cast<int64_t>(row.next_retry_at));
  stmt.bind(10, static_cast<int64_t>(row.last_attempt_at));
  stmt.bind(11, row.last_error);
  stmt.bind(12, static_cast<int64_t>(row.created_at));
  stmt.bind(13, static_cast<int64_t>(row.updated_at));
  stmt.bind(14, static_cast<int64_t>(row.sent_at));
  stmt.exec();
}

OutboxRow ReadOutboxRow(SQLite::Statement& stmt, int first) {
  OutboxRow r;
  int c = first;
  r.id = stmt.getColumn(c++).getInt64();
  r.message_id = stmt.getColumn(c++).getString();
  r.biz_type = stmt.getColumn(c++).getString();
  r.biz_key = stmt.getColumn(c++).getString();
  r.topic = stmt.getColumn(c++).getString();
  {
    SQLite::Column payload = stmt.getColumn(c++);
    r.payload.assign(static_cast<const char*>(payload.getBlob()), payload.getBytes());
  }
  r.status = ParseStatus(stmt.getColumn(c++).getString()).value_or(OutboxStatus::kSending);
  r.attempts = stmt.getColumn(c++).getInt();
  r.max_attempts = stmt.getColumn(c++).getInt();
  r.next_retry_at = stmt.getColumn(c++).getInt64();
  r.last_attempt_at = stmt.getColumn(c++).getInt64();
  r.last_error = stmt.getColumn(c++).getString();
  r.created_at = stmt.getColumn(c++).getInt64();
  r.updated_at = stmt.getColumn(c++).getInt64();
  r.sent_at = stmt.getColumn(c++).getInt64();
  return r;
}

int MarkOutboxSent(SQLite::Database& db, const std::vector<std::string>& message_ids,
                   int64_t now_ms) {
  SQLite::Statement stmt(db, R"sql(
    UPDATE outbox SET status = 'SENT', sent_at = ?1, updated_at = ?1, last_error = ''
    WHERE message_id = ?2 AND status = 'SENDING')sql");
  int changed = 0;
  for (const std::string& id : message_ids) {
    stmt.bind(1, static_cast<int64_t>(now_ms));
    stmt.bind(2, id);
    changed += stmt.exec();
    stmt.reset();
  }
  return changed;
}

void RecordOutboxError(SQLite::Database& db, const std::vector<std::string>& message_ids,
                       const std::string& error, int64_t now_ms) {
  SQLite::Statement stmt(db, R"sql(
    UPDATE outbox SET last_error = ?1, updated_at = ?2
    WHERE message_id = ?3 AND status = 'SENDING')sql");
  for (const std::string& id : message_ids) {
    stmt.bind(1, error);
    stmt.bind(2, static_cast<int64_t>(now_ms));
    stmt.bind(3, id);
    stmt.exec();
    stmt.reset();
  }
}

}  // namespace outbox
