#include "accounting_service/accounting_db_schema.h"

namespace outbox::accounting {
namespace {

// Migrations 1-2 predate versioning: a file made then has user_version 0
// and runs them both, so each creates or adds only what is missing.

// 1: the schema of the first release.
void CreateVouchersAndProcessed(SQLite::Database& db) {
  db.exec(R"sql(
    CREATE TABLE IF NOT EXISTS vouchers (
      id             INTEGER PRIMARY KEY,
      voucher_id     TEXT    NOT NULL UNIQUE,
      payment_id     TEXT    NOT NULL UNIQUE,
      message_id     TEXT    NOT NULL,
      debit_account  TEXT    NOT NULL,
      credit_account TEXT    NOT NULL,
      amount_minor   INTEGER NOT NULL CHECK (amount_minor > 0),
      currency       TEXT    NOT NULL,
      created_at     INTEGER NOT NULL
    );
    CREATE TABLE IF NOT EXISTS processed_messages (
      message_id   TEXT PRIMARY KEY,
      payment_id   TEXT    NOT NULL,
      voucher_id   TEXT    NOT NULL,
      processed_at INTEGER NOT NULL
    ) WITHOUT ROWID;
  )sql");
}

// 2: empty for older vouchers: no trace.
void AddTraceparent(SQLite::Database& db) {
  AddColumnIfMissing(db, "vouchers", "traceparent", "TEXT NOT NULL DEFAULT ''");
}

// 3: pruning takes the oldest processed message ids a batch at a time; without
// the index each batch would scan the table. (IF NOT EXISTS: an operator may
// have made it by hand on a large file ahead of the upgrade.)
void AddProcessedAtIndex(SQLite::Database& db) {
  db.exec(
      "CREATE INDEX IF NOT EXISTS processed_messages_processed_at "
      "ON processed_messages (processed_at)");
}

}  // namespace

const DbSchema& AccountingDbSchema() {
  static const DbSchema* const schema = new DbSchema{{
      {"vouchers and processed_messages", CreateVouchersAndProcessed},
      {"traceparent on vouchers", AddTraceparent},
      {"processed_at index on processed_messages", AddProcessedAtIndex},
  }};
  return *schema;
}

}  // namespace outbox::accounting
