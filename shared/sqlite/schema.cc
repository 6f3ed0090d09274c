#include "shared/sqlite/schema.h"

#include <errno.h>  // program_invocation_short_name

#include <sqlite3.h>

#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
#include "shared/observability/log.h"
#include "shared/sqlite/sqlite_file.h"

namespace outbox {

int SchemaVersion(SQLite::Database& db) {
  return db.execAndGet("PRAGMA user_version").getInt();
}

int PeekSchemaVersion(const std::string& path) {
  // The 100-byte database header: the magic string, then user_version as a
  // big-endian 32-bit integer at offset 60 (sqlite.org/fileformat.html).
  //
  // Read through SQLite's own VFS, never with open()/read()/close(): POSIX
  // locks belong to the process and the file, so closing any descriptor of a
  // file drops every lock this process's connections hold on it. The unix
  // VFS knows the connections of the process and keeps such a descriptor
  // open until their locks are gone.
  constexpr char kMagic[] = "SQLite format 3";  // and its terminating NUL
  sqlite3_vfs* vfs = sqlite3_vfs_find(nullptr);
  if (vfs == nullptr || sqlite3_initialize() != SQLITE_OK) return 0;
  // The name as the pager hands it over: absolute, followed by two NULs.
  std::string name(vfs->mxPathname + 2, '\0');
  if (vfs->xFullPathname(vfs, path.c_str(), vfs->mxPathname + 1, name.data()) != SQLITE_OK) {
    return 0;
  }
  std::unique_ptr<char[]> storage(new char[vfs->szOsFile]());
  auto* file = reinterpret_cast<sqlite3_file*>(storage.get());
  int flags = SQLITE_OPEN_READONLY | SQLITE_OPEN_MAIN_DB;
  if (vfs->xOpen(vfs, name.c_str(), file, flags, &flags) != SQLITE_OK) {
    // A failed xOpen leaves nothing to close (pMethods stays null).
    if (file->pMethods != nullptr) file->pMethods->xClose(file);
    return 0;
  }
  unsigned char header[100];
  const int rc = file->pMethods->xRead(file, header, sizeof(header), 0);
  file->pMethods->xClose(file);
  if (rc != SQLITE_OK) return 0;  // SQLITE_IOERR_SHORT_READ: shorter than a header
  if (std::string(reinterpret_cast<const char*>(header), sizeof(kMagic)) !=
      std::string(kMagic, sizeof(kMagic))) {
    return 0;
  }
  const uint32_t v = (uint32_t{header[60]} << 24) | (uint32_t{header[61]} << 16) |
                     (uint32_t{header[62]} << 8) | uint32_t{header[63]};
  return static_cast<int>(static_cast<int32_t>(v));
}

absl::Status NewerSchemaError(const std::string& path, int version, const DbSchema& schema) {
  // Named by the running binary, since a producer, its recovery and the
  // tools may all open one file: the one too old to open it is this one.
  return absl::FailedPreconditionError(
      absl::StrCat(path, " has schema version ", version, "; this ", program_invocation_short_name,
                   " knows up to ", schema.latest(), ": refusing to open a newer file"));
}

absl::Status UpgradeSchema(SQLite::Database& db, const std::string& path, const DbSchema& schema,
                           int target) {
  if (target < 0) target = schema.latest();
  // The usual start: already up to date, found without taking the write lock.
  int version = 0;
  absl::Status s = CatchSqlite(absl::StrCat("read the schema version of ", path), [&] {
    version = SchemaVersion(db);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  if (version > schema.latest()) return NewerSchemaError(path, version, schema);
  if (version >= target) return absl::OkStatus();

  while (true) {
    const Migration* applied = nullptr;
    s = WriteTransaction(db, [&]() -> absl::Status {
      applied = nullptr;  // a retried transaction starts over
      // Another process may have moved the version since it was read.
      version = SchemaVersion(db);
      if (version > schema.latest()) return NewerSchemaError(path, version, schema);
      if (version >= target) return absl::OkStatus();
      const Migration& next = schema.migrations[static_cast<size_t>(version)];
      next.apply(db);
      db.exec(absl::StrCat("PRAGMA user_version = ", version + 1));
      applied = &next;
      return absl::OkStatus();
    });
    if (!s.ok()) {
      if (absl::IsFailedPrecondition(s)) return s;
      return absl::Status(s.code(), absl::StrCat("upgrade ", path, " from schema version ", version,
                                                 ": ", s.message()));
    }
    if (applied == nullptr) return absl::OkStatus();
    LogInfo("schema_upgraded", {KV("db", path), KV("from", version), KV("to", version + 1),
                                KV("change", applied->what)});
  }
}

void AddColumnIfMissing(SQLite::Database& db, const std::string& table, const std::string& column,
                        const std::string& declaration) {
  {
    SQLite::Statement has(db, "SELECT 1 FROM pragma_table_info(?) WHERE name = ?");
    has.bind(1, table);
    has.bind(2, column);
    if (has.executeStep()) return;
  }
  db.exec(absl::StrCat("ALTER TABLE ", table, " ADD COLUMN ", column, " ", declaration));
}

}  // namespace outbox
