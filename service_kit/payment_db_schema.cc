#include "service_kit/payment_db_schema.h"

#include "shared/sqlite/outbox_table.h"

namespace outbox {
namespace {

// Migrations 1-4 predate versioning: a file made then has user_version 0
// and runs them all, so each creates or adds only what is missing.

// 1: the schema of the first release.
void CreatePaymentsOutboxAndLease(SQLite::Database& db) {
  db.exec(R"sql(
    CREATE TABLE IF NOT EXISTS payments (
      id              INTEGER PRIMARY KEY,
      payment_id      TEXT    NOT NULL UNIQUE,
      idempotency_key TEXT    NOT NULL UNIQUE,
      payer_account   TEXT    NOT NULL,
      payee_account   TEXT    NOT NULL,
      amount_minor    INTEGER NOT NULL CHECK (amount_minor > 0),
      currency        TEXT    NOT NULL,
      description     TEXT    NOT NULL,
      created_at      INTEGER NOT NULL
    );
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
      UNIQUE (biz_type, biz_key)
    );
    CREATE INDEX IF NOT EXISTS outbox_status_next_retry ON outbox (status, next_retry_at);
    CREATE TABLE IF NOT EXISTS recovery_lease (
      name       TEXT PRIMARY KEY,
      holder     TEXT    NOT NULL,
      expires_at INTEGER NOT NULL
    );
  )sql");
}

// 2
void CreateArchive(SQLite::Database& db) {
  db.exec(R"sql(
    -- Retention walks SENT rows by age without touching the rest.
    CREATE INDEX IF NOT EXISTS outbox_sent_at ON outbox (sent_at) WHERE status = 'SENT';
    -- Archived SENT rows, same columns, moved here in small batches.
    CREATE TABLE IF NOT EXISTS outbox_archive AS SELECT * FROM outbox WHERE 0;
  )sql");
}

// Columns that outbox_archive shares with outbox are added to both, in the
// same order, so the archive's `INSERT ... SELECT *` copy keeps lining up.
void AddRowColumn(SQLite::Database& db, const char* column) {
  for (const char* table : {"outbox", "outbox_archive"}) {
    AddColumnIfMissing(db, table, column, "TEXT NOT NULL DEFAULT ''");
  }
}

// 3: empty for older rows, so accounting replies to its default queue.
void AddMessageTypeAndReplyTo(SQLite::Database& db) {
  AddRowColumn(db, "message_type");
  AddRowColumn(db, "reply_to");
}

// 4: empty for older rows: no trace.
void AddTraceparent(SQLite::Database& db) {
  AddRowColumn(db, "traceparent");
}

// 5: what the operator's tools keep (failure kinds and groups, message
// history, the audit trail).
void AddOperatorTables(SQLite::Database& db) {
  CreateOutboxOperatorTables(db);
}

// 6: the retention of the archive and of the audit trail (their indexes by
// age, and the watermark outbox_check reads). Builds the archive's index
// over every archived row, once.
void AddRetentionTables(SQLite::Database& db) {
  CreateOutboxRetentionTables(db);
}

// 7: when each row was last re-driven or repaired, kept in the row (the
// history keeps a message's newest events only); rows restarted before it
// get it from their history. And the operator's reason in the audit trail.
void AddRestartedAtAndAuditReason(SQLite::Database& db) {
  AddOutboxRestartedAt(db);
  AddOutboxAuditReason(db);
}

}  // namespace

const DbSchema& PaymentDbSchema() {
  static const DbSchema* const schema = new DbSchema{{
      {"payments, outbox and recovery_lease", CreatePaymentsOutboxAndLease},
      {"outbox_archive and outbox_sent_at", CreateArchive},
      {"message_type and reply_to on outbox and outbox_archive", AddMessageTypeAndReplyTo},
      {"traceparent on outbox and outbox_archive", AddTraceparent},
      {"failure kinds and groups, outbox_history and outbox_audit", AddOperatorTables},
      {"outbox_archive_sent_at, outbox_audit_at and outbox_retention", AddRetentionTables},
      {"restarted_at on outbox and outbox_archive, reason on outbox_audit",
       AddRestartedAtAndAuditReason},
  }};
  return *schema;
}

}  // namespace outbox
