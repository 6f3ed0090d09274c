#pragma once

// SQLite at the storage edge: open with explicit durability, run short write
// transactions with BEGIN IMMEDIATE and retry on SQLITE_BUSY, and turn
// SQLiteCpp's exceptions into absl::Status.
#include <functional>
#include <memory>
#include <string>

#include <SQLiteCpp/SQLiteCpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace outbox {

enum class Durability { kFull, kNormal, kOff };

absl::StatusOr<Durability> ParseDurability(const std::string& name);  // "full" | "normal" | "off"

struct DbOptions {
  Durability durability = Durability::kFull;
  int busy_timeout_ms = 5000;
};

// Opens (creating if needed) a database in WAL mode.
absl::StatusOr<std::unique_ptr<SQLite::Database>> OpenDatabase(const std::string& path,
                                                               const DbOptions& options);
absl::StatusOr<std::unique_ptr<SQLite::Database>> OpenDatabaseReadOnly(const std::string& path);

// Runs `body` inside BEGIN IMMEDIATE ... COMMIT. `body` may throw
// SQLite::Exception or return a non-OK status; either rolls back. A busy
// database is retried a few times before UNAVAILABLE is returned.
absl::Status WriteTransaction(SQLite::Database& db,
                              const std::function<absl::Status()>& body);

// Converts the exception being handled into a Status with `context`.
absl::Status SqliteError(const SQLite::Exception& e, const std::string& context);

// Runs `fn` and converts a SQLite::Exception into a Status.
absl::Status Guard(const std::string& context, const std::function<absl::Status()>& fn);

}  // namespace outbox
