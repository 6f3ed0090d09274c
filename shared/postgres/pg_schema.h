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
  // transaction that sets the version: its statements on `conn`, an error
  // returned rolls the migration back. Never begin, commit or roll back.
  std::function<absl::Status(PgConnection&)> apply;
};

struct PgSchema {
  // Its row of schema_version, the key its version is kept under: required,
  // and the adopter's own. The library's schemas ("outbox", PgOutboxSchema)
  // have theirs; UpgradePgSchema and CheckPgSchema refuse an empty name or
  // one of theirs with INVALID_ARGUMENT, since the versions of two schemas
  // under one name would be taken for each other's.
  std::string name;
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
// INVALID_ARGUMENT, before anything is read, for a schema without a name or
// named as one of the library's.
absl::Status UpgradePgSchema(PgSession& session, const PgSchema& schema);

// For a process that works on the database but never creates or upgrades
// it (recovery, as RecoveryStore::Open does for SQLite): OK at
// schema.latest(), NOT_FOUND while older (its producer upgrades it),
// FAILED_PRECONDITION when newer or when the database holds none of it
// (version 0: not created yet, or the wrong database); INVALID_ARGUMENT as
// for UpgradePgSchema. Reads only.
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

// A consumer's schema in one call, as ConsumerSchema (shared/sqlite/inbox.h)
// is on SQLite: named `name` (the adopter's own, as every PgSchema), its
// migration 1 runs `tables` (the adopter's CREATE statements, several
// separated by ';') and CreatePgInboxTable(conn, inbox_table) in one
// transaction. Later versions are migrations appended to the result's
// `migrations`. The consumer brings its database to it with UpgradePgSchema.
PgSchema PgConsumerSchema(std::string name, std::string tables, std::string inbox_table = "inbox");

// The library's own schema: version 1 is CreatePgOutboxTables.
const PgSchema& PgOutboxSchema();

}  // namespace outbox
