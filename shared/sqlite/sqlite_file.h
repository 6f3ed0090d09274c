#pragma once

// SQLite at the storage edge: open with explicit durability, run short write
// transactions with BEGIN IMMEDIATE and retry on SQLITE_BUSY, and turn
// SQLiteCpp's exceptions into absl::Status.
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <SQLiteCpp/SQLiteCpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shared/base/mutex.h"
#include "shared/sqlite/schema.h"

namespace outbox {

enum class Durability { kFull, kNormal, kOff };

absl::StatusOr<Durability> ParseDurability(const std::string& name);  // "full" | "normal" | "off"

struct DbOptions {
  Durability durability = Durability::kFull;
  int busy_timeout_ms = 5000;
  // false: a missing file is an error (FAILED_PRECONDITION), never created.
  bool create_if_missing = true;
};

// Opens a database in WAL mode, creating the file if missing and allowed.
// Safe while other processes open the same file: a lock held by a
// concurrent opener is retried for at least the busy timeout.
absl::StatusOr<std::unique_ptr<SQLite::Database>> OpenDatabase(const std::string& path,
                                                               const DbOptions& options);
absl::StatusOr<std::unique_ptr<SQLite::Database>> OpenDatabaseReadOnly(const std::string& path);

// Runs `body` inside BEGIN IMMEDIATE ... COMMIT. `body` may throw
// SQLite::Exception or return a non-OK status; either rolls back. A busy
// database is retried a few times before UNAVAILABLE is returned.
absl::Status WriteTransaction(SQLite::Database& db, const std::function<absl::Status()>& body);

// Converts the exception being handled into a Status with `context`.
absl::Status SqliteError(const SQLite::Exception& e, const std::string& context);

// Runs `fn` and converts a SQLite::Exception into a Status.
absl::Status Guard(const std::string& context, const std::function<absl::Status()>& fn);

// Moves most of the WAL checkpointing off the hot path. SQLite's automatic
// checkpoint runs inside whichever commit crosses 1000 WAL pages and fsyncs
// the database file there, stalling that writer for up to hundreds of
// milliseconds. Call SetWriterCheckpoint on the hot writer's connection and
// keep one of these: it runs PASSIVE checkpoints (which never block writers
// or readers) from its own thread and connection.
class BackgroundCheckpointer {
 public:
  static absl::StatusOr<std::unique_ptr<BackgroundCheckpointer>> Start(
      const std::string& path, absl::Duration every = absl::Milliseconds(250));
  ~BackgroundCheckpointer();

 private:
  BackgroundCheckpointer(std::unique_ptr<SQLite::Database> db, absl::Duration every);
  void Run();

  std::unique_ptr<SQLite::Database> db_;
  const absl::Duration every_;
  Notification stop_;
  std::thread thread_;
};

// The writer's own checkpoint, once the log holds `frames` pages. The
// background PASSIVE checkpoints alone never let the log start over under a
// steady load: the writer appends while they copy, so the log is never
// completely copied, and SQLite only rewinds a log that is. It then grows for
// as long as the load lasts (1.6 GB in 40 s at saturation), every commit
// writing into new blocks the file system allocates and zeroes (14 % of
// payment_service's writer thread). The writer's checkpoint copies only what
// the background left (nothing is appended meanwhile: it runs right after the
// writer's commit), so the next commit starts the log from the beginning.
constexpr int kWriterCheckpointFrames = 4096;  // 16 MiB of 4 KiB pages
void SetWriterCheckpoint(SQLite::Database& db, int frames = kWriterCheckpointFrames);

// A service's handles on its SQLite file: one writer connection (short
// BEGIN IMMEDIATE transactions, its own checkpoint only past 4096 pages), one reader connection
// (WAL readers never block the writer), and the background checkpointer.
// Each connection is used under its own mutex.
struct SqliteFile {
  Mutex write_mu;
  std::unique_ptr<SQLite::Database> writer ABSL_GUARDED_BY(write_mu);
  Mutex read_mu;
  std::unique_ptr<SQLite::Database> reader ABSL_GUARDED_BY(read_mu);
  std::unique_ptr<BackgroundCheckpointer> checkpointer;
};

// Opens both connections and brings the file to `schema`'s latest version on
// the writer (UpgradeSchema, retried while another process holds the file)
// before the reader opens. A file newer than `schema` is FAILED_PRECONDITION
// and, when its header already says so, refused before SQLite opens it: not
// even a -wal or -shm file appears. A null `schema` creates nothing.
absl::StatusOr<std::unique_ptr<SqliteFile>> OpenSqliteFile(const std::string& path,
                                                           const DbOptions& options,
                                                           const DbSchema* schema);

}  // namespace outbox
