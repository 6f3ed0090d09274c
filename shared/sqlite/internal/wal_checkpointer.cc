#include "shared/sqlite/internal/wal_checkpointer.h"

#include <sqlite3.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "shared/observability/log.h"
#include "shared/sqlite/sqlite_file.h"

namespace outbox {
namespace {

// How long a checkpoint waits for another connection's write transaction.
// The hook runs on the writer's thread, which would wait as long for the
// same lock at its next BEGIN IMMEDIATE anyway.
constexpr int kLockBusyTimeoutMs = 200;

absl::StatusOr<std::unique_ptr<SQLite::Database>> OpenConnection(const std::string& path,
                                                                 DbOptions options,
                                                                 const std::string& vfs) {
  options.create_if_missing = false;
  options.busy_timeout_ms = kLockBusyTimeoutMs;
  options.vfs = vfs;
  return OpenDatabase(path, options);
}

}  // namespace

absl::StatusOr<std::unique_ptr<WalCheckpointer>> WalCheckpointer::Open(
    const std::string& path, const DbOptions& options, int frames,
    const std::string& checkpoint_vfs) {
  auto lock = OpenConnection(path, options, "");
  if (!lock.ok()) return lock.status();
  auto db = OpenConnection(path, options, checkpoint_vfs);
  if (!db.ok()) return db.status();
  return std::unique_ptr<WalCheckpointer>(
      new WalCheckpointer(path, options, frames, std::move(lock).value(), std::move(db).value()));
}

WalCheckpointer::WalCheckpointer(std::string path, DbOptions options, int frames,
                                 std::unique_ptr<SQLite::Database> lock,
                                 std::unique_ptr<SQLite::Database> db)
    : path_(std::move(path)),
      options_(std::move(options)),
      frames_(frames),
      lock_(std::move(lock)),
      db_(std::move(db)) {}

void WalCheckpointer::Attach(SQLite::Database& writer) {
  // Replaces SQLite's own automatic checkpoint, which shares the hook.
  sqlite3_wal_hook(writer.getHandle(), &WalCheckpointer::OnCommit, this);
}

int WalCheckpointer::OnCommit(void* self, sqlite3* /*db*/, const char* /*name*/, int frames) {
  auto* checkpointer = static_cast<WalCheckpointer*>(self);
  checkpointer->log_frames_.store(frames, std::memory_order_relaxed);
  // The commit has happened whatever this returns; a checkpoint that could
  // not run is counted and logged by CheckpointNow and tried at the next one.
  if (frames >= checkpointer->frames_) checkpointer->CheckpointNow().status().IgnoreError();
  return SQLITE_OK;
}

absl::StatusOr<CheckpointResult> WalCheckpointer::CheckpointNow() {
  MutexLock l(&mu_);
  CheckpointResult result;
  absl::Status s = lock_ != nullptr ? absl::OkStatus() : ReopenLock();
  if (s.ok()) {
    s = CatchSqlite("take the write lock for a checkpoint", [&] {
      lock_->exec("BEGIN IMMEDIATE");
      return absl::OkStatus();
    });
  }
  if (s.ok()) {
    const int rc = sqlite3_wal_checkpoint_v2(db_->getHandle(), nullptr, SQLITE_CHECKPOINT_PASSIVE,
                                             &result.log_frames, &result.copied_frames);
    if (rc != SQLITE_OK) {
      s = absl::InternalError(absl::StrCat("checkpoint: ", sqlite3_errstr(rc), " (",
                                           sqlite3_errmsg(db_->getHandle()), ")"));
    }
    absl::Status released = ReleaseWriteLock();
    if (s.ok()) s = released;
  }
  if (!s.ok()) {
    ++skipped_;
    // Once per run of failures: a writer of another process may hold the
    // lock for a while, and every commit past `frames` tries again.
    if (!last_failed_) {
      LogWarning("wal_checkpoint_skipped", {KV("db", path_), KV("error", s.ToString())});
    }
    last_failed_ = true;
    return s;
  }
  last_failed_ = false;
  return result;
}

absl::Status WalCheckpointer::ReleaseWriteLock() {
  absl::Status s = CatchSqlite("release the checkpoint's write lock", [&] {
    lock_->exec("ROLLBACK");
    return absl::OkStatus();
  });
  if (s.ok() && sqlite3_get_autocommit(lock_->getHandle()) != 0) return s;
  // A connection still inside its transaction would hold the write lock for
  // good; closing it releases every lock it holds.
  LogError("wal_checkpoint_lock_reopened", {KV("db", path_), KV("error", s.ToString())});
  absl::Status reopened = ReopenLock();
  return s.ok() ? reopened : s;
}

absl::Status WalCheckpointer::ReopenLock() {
  lock_.reset();
  auto reopened = OpenConnection(path_, options_, "");
  if (!reopened.ok()) {
    return absl::Status(
        reopened.status().code(),
        absl::StrCat("reopen the checkpoint's lock connection: ", reopened.status().message()));
  }
  lock_ = std::move(reopened).value();
  return absl::OkStatus();
}

int64_t WalCheckpointer::skipped() const {
  MutexLock l(&mu_);
  return skipped_;
}

}  // namespace outbox
