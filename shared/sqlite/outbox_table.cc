#include "shared/sqlite/outbox_table.h"

#include "absl/strings/str_cat.h"
#include "shared/observability/log.h"
#include "shared/outbox/internal/failure.h"
#include "shared/sqlite/internal/history.h"
#include "shared/sqlite/schema.h"

namespace outbox {

const char* const kOutboxColumns =
    "o.id, o.message_id, o.biz_type, o.biz_key, o.topic, o.message_type, o.reply_to, o.payload, "
    "o.status, o.attempts, o.max_attempts, o.next_retry_at, o.last_attempt_at, o.last_error, "
    "o.created_at, o.updated_at, o.sent_at, o.traceparent, o.failure_kind, o.failure_group, "
    "o.acknowledged_by, o.restarted_at";

DbSchema ProducerSchema(std::string tables) {
  return DbSchema{{{"the adopter's tables and the outbox", [tables](SQLite::Database& db) {
                      db.exec(tables);
                      CreateOutboxTable(db);
                    }}}};
}

void CreateOutboxTable(SQLite::Database& db) {
  db.exec(R"sql(
    CREATE TABLE IF NOT EXISTS outbox (
      id              INTEGER PRIMARY KEY,
      message_id      TEXT    NOT NULL UNIQUE,
      biz_type        TEXT    NOT NULL,
      biz_key         TEXT    NOT NULL,
      topic           TEXT    NOT NULL,   -- routing key: the queue it goes to
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
      message_type    TEXT    NOT NULL DEFAULT '',
      reply_to        TEXT    NOT NULL DEFAULT '',
      traceparent     TEXT    NOT NULL DEFAULT '',
      UNIQUE (biz_type, biz_key)
    );
    CREATE INDEX IF NOT EXISTS outbox_status_next_retry ON outbox (status, next_retry_at);
    -- Retention walks SENT rows by age without touching the rest.
    CREATE INDEX IF NOT EXISTS outbox_sent_at ON outbox (sent_at) WHERE status = 'SENT';
    -- Archived SENT rows, same columns, moved here in small batches.
    CREATE TABLE IF NOT EXISTS outbox_archive AS SELECT * FROM outbox WHERE 0;
    -- Which recovery instance may claim rows, until when.
    CREATE TABLE IF NOT EXISTS recovery_lease (
      name       TEXT PRIMARY KEY,
      holder     TEXT    NOT NULL,
      expires_at INTEGER NOT NULL
    );
  )sql");
  CreateOutboxOperatorTables(db);
  AddOutboxAuditReason(db);
  CreateOutboxRetentionTables(db);
  AddOutboxRestartedAt(db);
}

void CreateOutboxOperatorTables(SQLite::Database& db) {
  // Added to outbox and outbox_archive alike, in the same order, so the
  // archive's `INSERT ... SELECT *` copy keeps lining up.
  for (const char* table : {"outbox", "outbox_archive"}) {
    for (const char* column : {"failure_kind", "failure_group", "acknowledged_by"}) {
      AddColumnIfMissing(db, table, column, "TEXT NOT NULL DEFAULT ''");
    }
  }
  db.exec(R"sql(
    -- Failure groups: FAILED rows counted and walked by group.
    CREATE INDEX IF NOT EXISTS outbox_failure_group ON outbox (failure_group, id)
      WHERE status = 'FAILED';
    -- What happened to a message beyond "published once, acknowledged":
    -- retries, failures, rejects, operator actions. Bounded per message;
    -- deleted with the row when it is archived.
    CREATE TABLE IF NOT EXISTS outbox_history (
      id         INTEGER PRIMARY KEY,
      message_id TEXT    NOT NULL,
      at         INTEGER NOT NULL,
      instance   TEXT    NOT NULL,
      event      TEXT    NOT NULL,
      detail     TEXT    NOT NULL DEFAULT ''
    );
    CREATE INDEX IF NOT EXISTS outbox_history_message ON outbox_history (message_id, id);
    -- Every operator action that changed rows (or tried to), kept until the
    -- audit retention deletes it.
    CREATE TABLE IF NOT EXISTS outbox_audit (
      id      INTEGER PRIMARY KEY,
      at      INTEGER NOT NULL,
      actor   TEXT    NOT NULL,
      action  TEXT    NOT NULL,
      target  TEXT    NOT NULL,
      dry_run INTEGER NOT NULL,
      rows    INTEGER NOT NULL,
      outcome TEXT    NOT NULL
    );
  )sql");
}

void AddOutboxAuditReason(SQLite::Database& db) {
  AddColumnIfMissing(db, "outbox_audit", "reason", "TEXT NOT NULL DEFAULT ''");
}

void CreateOutboxRetentionTables(SQLite::Database& db) {
  db.exec(R"sql(
    -- Archive retention deletes archived rows by age: outbox_archive is made
    -- by CREATE TABLE AS, so it has no index of its own otherwise.
    CREATE INDEX IF NOT EXISTS outbox_archive_sent_at ON outbox_archive (sent_at);
    -- Audit retention deletes records by age.
    CREATE INDEX IF NOT EXISTS outbox_audit_at ON outbox_audit (at);
    -- What retention deleted, per table: rows older than `pruned_before`
    -- (unix ms; outbox_archive: by sent_at, outbox_audit: by at) may be gone
    -- on purpose. Written in the transaction of each delete.
    CREATE TABLE IF NOT EXISTS outbox_retention (
      name          TEXT PRIMARY KEY,
      pruned_before INTEGER NOT NULL,
      pruned_rows   INTEGER NOT NULL
    );
  )sql");
}

void AddOutboxRestartedAt(SQLite::Database& db) {
  const bool fill = !db.execAndGet(
                           "SELECT count(*) FROM pragma_table_info('outbox') "
                           "WHERE name = 'restarted_at'")
                         .getInt();
  for (const char* table : {"outbox", "outbox_archive"}) {
    AddColumnIfMissing(db, table, "restarted_at", "INTEGER NOT NULL DEFAULT 0");
  }
  if (!fill) return;
  // Rows restarted before the column: the newest re-drive or repair in
  // their history (archived rows have no history, and need none).
  const std::string restarts = absl::StrCat("outbox_history h WHERE h.event IN ('", kEventRedriven,
                                            "', '", kEventRepaired, "')");
  db.exec(absl::StrCat("UPDATE outbox SET restarted_at = (SELECT max(h.at) FROM ", restarts,
                       " AND h.message_id = outbox.message_id) WHERE message_id IN (SELECT "
                       "h.message_id FROM ",
                       restarts, ")"));
}

OutboxInserter::OutboxInserter(SQLite::Database& db)
    : db_(db), stmt_(db, R"sql(
        INSERT INTO outbox (message_id, biz_type, biz_key, topic, message_type, reply_to, payload,
                            status, attempts, max_attempts, next_retry_at, last_attempt_at,
                            last_error, created_at, updated_at, sent_at, traceparent)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?))sql") {}

int64_t OutboxInserter::Insert(const OutboxMessage& row) {
  SQLite::Statement& stmt = stmt_;
  stmt.tryReset();  // after a failed insert reset() would rethrow its error
  stmt.clearBindings();
  int c = 1;
  stmt.bind(c++, row.message_id);
  stmt.bind(c++, row.biz_type);
  stmt.bind(c++, row.biz_key);
  stmt.bind(c++, row.topic);
  stmt.bind(c++, row.message_type);
  stmt.bind(c++, row.reply_to);
  stmt.bind(c++, row.payload.data(), static_cast<int>(row.payload.size()));
  stmt.bind(c++, std::string(StatusName(row.status)));
  stmt.bind(c++, row.attempts);
  stmt.bind(c++, row.max_attempts);
  stmt.bind(c++, static_cast<int64_t>(row.next_retry_at));
  stmt.bind(c++, static_cast<int64_t>(row.last_attempt_at));
  stmt.bind(c++, row.last_error);
  stmt.bind(c++, static_cast<int64_t>(row.created_at));
  stmt.bind(c++, static_cast<int64_t>(row.updated_at));
  stmt.bind(c++, static_cast<int64_t>(row.sent_at));
  stmt.bind(c++, row.traceparent);
  stmt.exec();
  return db_.getLastInsertRowid();
}

OutboxMessage ReadOutboxMessage(SQLite::Statement& stmt, int first) {
  OutboxMessage r;
  int c = first;
  r.id = stmt.getColumn(c++).getInt64();
  r.message_id = stmt.getColumn(c++).getString();
  r.biz_type = stmt.getColumn(c++).getString();
  r.biz_key = stmt.getColumn(c++).getString();
  r.topic = stmt.getColumn(c++).getString();
  r.message_type = stmt.getColumn(c++).getString();
  r.reply_to = stmt.getColumn(c++).getString();
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
  r.traceparent = stmt.getColumn(c++).getString();
  r.failure_kind = stmt.getColumn(c++).getString();
  r.failure_group = stmt.getColumn(c++).getString();
  r.acknowledged_by = stmt.getColumn(c++).getString();
  r.restarted_at = stmt.getColumn(c++).getInt64();
  return r;
}

OutboxStateTable::OutboxStateTable(SQLite::Database& db)
    : load_(db, absl::StrCat("SELECT ", kOutboxColumns, " FROM outbox o WHERE o.message_id = ?")),
      save_(db, R"sql(
        UPDATE outbox SET status = ?2, attempts = ?3, next_retry_at = ?4, last_attempt_at = ?5,
                          last_error = ?6, updated_at = ?7, sent_at = ?8, failure_kind = ?9,
                          failure_group = ?10, acknowledged_by = ?11, restarted_at = ?12
        WHERE id = ?1)sql") {}

std::optional<OutboxMessage> OutboxStateTable::Load(const std::string& message_id) {
  load_.tryReset();  // reused across transactions: an earlier error must not rethrow
  load_.bind(1, message_id);
  std::optional<OutboxMessage> row;
  if (load_.executeStep()) row = ReadOutboxMessage(load_);
  // A statement left mid-step keeps its connection's read snapshot open past
  // the commit: kept across transactions, that snapshot would go stale and
  // every later BEGIN IMMEDIATE would fail with SQLITE_BUSY.
  load_.tryReset();
  return row;
}

void OutboxStateTable::Save(const OutboxMessage& row) {
  save_.tryReset();
  save_.bind(1, static_cast<int64_t>(row.id));
  save_.bind(2, std::string(StatusName(row.status)));
  save_.bind(3, row.attempts);
  save_.bind(4, static_cast<int64_t>(row.next_retry_at));
  save_.bind(5, static_cast<int64_t>(row.last_attempt_at));
  save_.bind(6, row.last_error);
  save_.bind(7, static_cast<int64_t>(row.updated_at));
  save_.bind(8, static_cast<int64_t>(row.sent_at));
  save_.bind(9, row.failure_kind);
  save_.bind(10, row.failure_group);
  save_.bind(11, row.acknowledged_by);
  save_.bind(12, static_cast<int64_t>(row.restarted_at));
  save_.exec();
}

void RunRowClosed(const RowClosed& on_closed, SQLite::Database& db, const OutboxMessage& row) {
  if (!on_closed) return;
  absl::Status status;
  db.exec("SAVEPOINT row_closed");
  try {
    status = on_closed(db, row);
  } catch (const SQLite::Exception& e) {
    status = absl::InternalError(e.what());
  }
  if (!status.ok()) db.exec("ROLLBACK TO row_closed");
  db.exec("RELEASE row_closed");
  if (!status.ok()) {
    LogWarning("row_closed_hook_failed",
               {KV("message_id", row.message_id), KV("status", StatusName(row.status)),
                KV("error", status.ToString())});
  }
}

AckTally RecordAcks(SQLite::Database& db, const std::vector<std::string>& message_ids,
                    int64_t now_ms, const RowClosed& on_closed) {
  OutboxStateTable table(db);
  return RecordAcks(table, db, message_ids, now_ms, on_closed);
}

AckTally RecordAcks(OutboxStateTable& table, SQLite::Database& db,
                    const std::vector<std::string>& message_ids, int64_t now_ms,
                    const RowClosed& on_closed) {
  std::optional<HistoryLog> history;  // prepared only off the happy path
  AckTally tally;
  for (const std::string& id : message_ids) {
    std::optional<OutboxMessage> row = table.Load(id);
    if (!row.has_value()) continue;
    const bool retried = row->attempts > 1;
    const bool was_failed = row->status == OutboxStatus::kFailed;
    const std::string failed_with = row->last_error;
    switch (OnAck(*row, now_ms)) {
      case AckEffect::kClosed: ++tally.closed; break;
      case AckEffect::kLateClosed: ++tally.late; break;
      case AckEffect::kAlreadySent: continue;
    }
    tally.create_to_sent_ms.push_back(now_ms - row->created_at);
    table.Save(*row);
    RunRowClosed(on_closed, db, *row);
    if (retried || was_failed) {  // published once and acknowledged: the row says it all
      if (!history) history.emplace(db);
      history->Append(id, now_ms, "consumer", kEventAcknowledged,
                      was_failed ? absl::StrCat("after ", row->attempts,
                                                " attempts, while FAILED (", failed_with, ")")
                                 : absl::StrCat("after ", row->attempts, " attempts"));
    }
  }
  return tally;
}

int RecordRejects(SQLite::Database& db, const std::vector<Rejection>& rejects, int64_t now_ms,
                  const RowClosed& on_closed) {
  OutboxStateTable table(db);
  std::optional<HistoryLog> history;
  int changed = 0;
  for (const Rejection& r : rejects) {
    std::optional<OutboxMessage> row = table.Load(r.message_id);
    if (!row.has_value() || !OnReject(*row, r.reason, now_ms, r.answered_at)) continue;
    table.Save(*row);
    RunRowClosed(on_closed, db, *row);
    if (!history) history.emplace(db);
    history->Append(r.message_id, now_ms, "consumer", kEventRejected, r.reason);
    ++changed;
  }
  return changed;
}

void RecordPublishFailure(SQLite::Database& db, const std::vector<std::string>& message_ids,
                          const std::string& error, int64_t now_ms, const std::string& instance) {
  OutboxStateTable table(db);
  std::optional<HistoryLog> history;
  for (const std::string& id : message_ids) {
    std::optional<OutboxMessage> row = table.Load(id);
    if (!row.has_value() || !OnPublishFailure(*row, error, now_ms)) continue;
    table.Save(*row);
    if (!history) history.emplace(db);
    history->Append(id, now_ms, instance, kEventPublishFailed,
                    absl::StrCat("attempt ", row->attempts, ": ", error));
  }
}

std::vector<std::string> TakenOver(SQLite::Database& db,
                                   const std::vector<std::string>& message_ids) {
  SQLite::Statement stmt(
      db, "SELECT status != 'SENDING' OR attempts > 1 FROM outbox WHERE message_id = ?");
  std::vector<std::string> taken;
  for (const std::string& id : message_ids) {
    stmt.reset();
    stmt.bind(1, id);
    if (stmt.executeStep() && stmt.getColumn(0).getInt() != 0) taken.push_back(id);
  }
  return taken;
}

}  // namespace outbox
