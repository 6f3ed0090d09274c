#pragma once

// WAL checkpoints that cannot meet SQLite's WAL-reset race.
//
// SQLite 3.7.0 to 3.51.2 (Debian 12 ships 3.40.1) has a race between a
// checkpoint and a writer that starts the log over (sqlite.org/wal.html, "the
// WAL-reset bug"; fixed in 3.51.3 and 3.44.6). A checkpoint reads the log's
// header, then how much of the log is already copied. If, between the two, a
// writer starts a completely copied log over and commits, the checkpoint
// copies with the old header and records frames as copied that never were.
// When the log starts over again those pages are gone from the database file:
// a table loses rows its indexes still list ("row N missing from index" in
// PRAGMA integrity_check). Any two connections can meet it, in one process or
// two; a thread descheduled between the two reads, or a process stopped
// there, stretches the window from nanoseconds to as long as it sleeps.
//
// Starting the log over takes the write lock. So every checkpoint here runs
// while a second connection holds the write lock (BEGIN IMMEDIATE, rolled
// back after): no writer can start the log over meanwhile. No connection
// checkpoints on its own (OpenDatabase sets wal_autocheckpoint=0). The
// writer's connection runs CheckpointNow from SQLite's WAL hook once a
// commit leaves `frames` pages in the log, on the writer's thread between two
// of its transactions: the log is copied completely (nothing is appended
// meanwhile), and the next commit starts it over, so it stays small under a
// steady load instead of growing.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <SQLiteCpp/SQLiteCpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "shared/base/internal/mutex.h"
#include "shared/sqlite/internal/db_options.h"

namespace outbox {

constexpr int kCheckpointFrames = 1024;  // 4 MiB of 4 KiB pages

struct CheckpointResult {
  int log_frames = 0;     // pages in the log when the checkpoint ran
  int copied_frames = 0;  // of those, copied into the database file
};

class WalCheckpointer {
 public:
  // Opens its two connections on `path` (an existing WAL file) with
  // `options`; `checkpoint_vfs` names the checkpointing connection's SQLite
  // VFS (empty: the default; tests trap its calls).
  static absl::StatusOr<std::unique_ptr<WalCheckpointer>> Open(
      const std::string& path, const DbOptions& options, int frames = kCheckpointFrames,
      const std::string& checkpoint_vfs = "");

  // From now on every commit on `writer` that leaves at least `frames` pages
  // in the log is followed by CheckpointNow on the committing thread. This
  // checkpointer must outlive `writer`'s connection.
  void Attach(SQLite::Database& writer);

  // One PASSIVE checkpoint while holding the write lock. UNAVAILABLE when
  // another connection kept the write lock past the busy timeout; the next
  // commit past `frames` tries again.
  absl::StatusOr<CheckpointResult> CheckpointNow();

  // Checkpoints that could not run (write lock busy, or an error), counted.
  int64_t skipped() const;

  // Pages in the log after the attached writer's last commit (0 before
  // one). It stays high while a reader pins an old snapshot (a checkpoint
  // cannot copy past it, and the log cannot start over) or while the write
  // lock is held elsewhere; it falls once a checkpoint copies everything
  // and the next commit starts the log over.
  int log_frames() const { return log_frames_.load(std::memory_order_relaxed); }

 private:
  WalCheckpointer(std::string path, DbOptions options, int frames,
                  std::unique_ptr<SQLite::Database> lock, std::unique_ptr<SQLite::Database> db);
  static int OnCommit(void* self, sqlite3* db, const char* name, int frames);
  absl::Status ReleaseWriteLock() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ReopenLock() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  const DbOptions options_;
  const int frames_;
  mutable Mutex mu_;
  std::unique_ptr<SQLite::Database> lock_ ABSL_GUARDED_BY(mu_);  // holds the write lock
  std::unique_ptr<SQLite::Database> db_ ABSL_GUARDED_BY(mu_);    // checkpoints
  int64_t skipped_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int> log_frames_{0};
  bool last_failed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace outbox
