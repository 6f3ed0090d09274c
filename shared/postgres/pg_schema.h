#pragma once

// Versioned schemas in PostgreSQL, as shared/sqlite/schema.h keeps them in
// SQLite: each schema (by name: one database may hold a producer's outbox
// and a consumer's inbox) records its version in the table schema_version,
// and an ordered list of migrations brings an older database up to date in
// place: migration i makes version i + 1 and commits together with that
// version, in one transaction. Openers starting together queue on an
// advisory lock, so each migration runs once whoever wins. A database newer
// than the list is refused untouched, since older code cannot know what the
// newer columns and tables mean.
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/postgres/pg_connection.h"
#include "shared/postgres/pg_session.h"

namespace outbox {

struct PgMigration {
  // What it changes, one line: in the upgrade's log line.
  std::string what;
  // Takes the database from the previous version to this one, inside the
  // transaction that sets the version.
  std::function<absl::Status(PgConnection&)> apply;
};

struct PgSchema {
  std::string name = "outbox";          // its row of schema_version
  std::vector<PgMigration> migrations;  // migrations[i] makes version i + 1
  int latest() const { return static_cast<int>(migrations.size()); }
};

// The version recorded for `schema_name`: 0 when the database has no
// schema_version table or no row for it.
absl::StatusOr<int> PgSchemaVersion(PgConnection& conn, const std::string& schema_name);

// Brings the database to schema.latest(), one migration per transaction,
// each under pg_advisory_xact_lock and reading the version again under it.
// FAILED_PRECONDITION, with nothing changed, when the database is newer
// than the schema; the migration's own error otherwise (nothing of it kept).
absl::Status UpgradePgSchema(PgSession& session, const PgSchema& schema);

// For a process that works on the database but never creates or upgrades
// it (recovery, as RecoveryStore::Open does for SQLite): OK at
// schema.latest(), NOT_FOUND while older (its producer upgrades it),
// FAILED_PRECONDITION when newer or when the database holds none of it
// (version 0: not created yet, or the wrong database). Reads only.
absl::Status CheckPgSchema(PgSession& session, const PgSchema& schema);

// What the pattern keeps in the producer's database, as CreateOutboxTable
// (shared/sqlite/outbox_table.h) makes it in SQLite, with the same columns
// and meanings (times BIGINT unix ms, the payload BYTEA): outbox and its
// indexes, outbox_archive, recovery_lease, outbox_history, outbox_audit and
// outbox_retention. A producer calls it in a migration of its schema.
absl::Status CreatePgOutboxTables(PgConnection& conn);

// A consumer's inbox (PgInbox, pg_inbox.h): message_id, the business key,
// the reference of what applying it made and processed_at, with the index
// the pruner walks. `table` is an SQL identifier of the adopter's choosing.
absl::Status CreatePgInboxTable(PgConnection& conn, const std::string& table = "inbox");

// The library's own schema: version 1 is CreatePgOutboxTables.
const PgSchema& PgOutboxSchema();

}  // namespace outbox
