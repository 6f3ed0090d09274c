#pragma once

// Versioned schemas. Each database records its schema version in
// PRAGMA user_version, and an ordered list of migrations brings an older file
// up to date in place: migration i makes version i + 1 and commits together
// with that version, in one BEGIN IMMEDIATE transaction. A file newer than
// the list is refused untouched, since an older binary cannot know what the
// newer columns and tables mean.
#include <SQLiteCpp/SQLiteCpp.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace outbox {

struct Migration {
  // What it changes, one line: in the upgrade's log line.
  std::string what;
  // Takes the file from the previous version to this one; throws
  // SQLite::Exception. Runs inside the transaction that sets the version.
  std::function<void(SQLite::Database&)> apply;
};

struct DbSchema {
  std::vector<Migration> migrations;  // migrations[i] makes version i + 1
  int latest() const { return static_cast<int>(migrations.size()); }
};

// PRAGMA user_version: 0 for a new file and for one made before versioning.
int SchemaVersion(SQLite::Database& db);

// The user_version in the file's header, read through SQLite's VFS (never a
// descriptor of our own, whose close would drop the process's locks on the
// file): no lock, no -wal or -shm file, nothing written. 0 when the file is missing, shorter
// than a header or not SQLite (SQLite's own open then says what is wrong). A
// WAL that is not checkpointed yet may hold a newer header, so this is a
// first look that can refuse early; SchemaVersion has the last word.
int PeekSchemaVersion(const std::string& path);

// FAILED_PRECONDITION: "<path> has schema version 7; this order_service
// knows up to 4: refusing to open a newer file" (the program that opened it).
absl::Status NewerSchemaError(const std::string& path, int version, const DbSchema& schema);

// Brings the file to version `target` (-1: schema.latest()), one migration
// per BEGIN IMMEDIATE transaction that reads the version again under the
// write lock, so processes upgrading one file at the same moment apply each
// migration exactly once between them. FAILED_PRECONDITION, with nothing
// changed, for a file newer than the schema; UNAVAILABLE while another
// process keeps the file busy (try again: nothing is half done).
absl::Status UpgradeSchema(SQLite::Database& db, const std::string& path, const DbSchema& schema,
                           int target = -1);

// ALTER TABLE `table` ADD COLUMN `column` `declaration` unless the column is
// there. Migrations that existed before versioning use it (and CREATE ... IF
// NOT EXISTS): a file from then has user_version 0 whatever it holds, so they
// all run on it and add only what it lacks.
void AddColumnIfMissing(SQLite::Database& db, const std::string& table, const std::string& column,
                        const std::string& declaration);

}  // namespace outbox
