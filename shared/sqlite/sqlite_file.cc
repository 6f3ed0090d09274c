#include "shared/sqlite/sqlite_file.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace outbox {
namespace {

// The payload that marks an ALREADY_EXISTS as the outbox table's.
constexpr char kOutboxRowExists[] = "outbox.OutboxRowExists";

}  // namespace

absl::StatusOr<Durability> ParseDurability(const std::string& name) {
  if (name == "full" || name == "FULL") return Durability::kFull;
  if (name == "normal" || name == "NORMAL") return Durability::kNormal;
  if (name == "off" || name == "OFF") return Durability::kOff;
  return absl::InvalidArgumentError(
      absl::StrCat("sqlite synchronous must be full, normal or off, not '", name, "'"));
}

absl::Status SqliteError(const SQLite::Exception& e, const std::string& context) {
  const int code = e.getErrorCode() & 0xff;
  // An exception made from a bare code has no extended code (-1).
  const int extended = e.getExtendedErrorCode() > 0 ? e.getExtendedErrorCode() : e.getErrorCode();
  std::string msg = absl::StrCat(context, ": ", e.what());
  if (code == SQLITE_BUSY || code == SQLITE_LOCKED) return absl::UnavailableError(msg);
  // A full disk (ENOSPC) is SQLITE_FULL; a file size limit (RLIMIT_FSIZE,
  // EFBIG with SIGXFSZ ignored) or a quota reaches SQLite as a failed write.
  // Either way the transaction was rolled back and a retry can succeed once
  // there is room again.
  if (code == SQLITE_FULL) return absl::ResourceExhaustedError(absl::StrCat(msg, " (disk full)"));
  if (extended == SQLITE_IOERR_WRITE || extended == SQLITE_IOERR_SHMSIZE ||
      extended == SQLITE_IOERR_TRUNCATE) {
    return absl::ResourceExhaustedError(
        absl::StrCat(msg, " (write failed: disk full, quota or file size limit)"));
  }
  // Any other I/O error (a read, an fsync, a lock the file system refused):
  // the disk, not the statement; a retry can succeed once it answers.
  if (code == SQLITE_IOERR) return absl::UnavailableError(msg);
  if (code == SQLITE_NOTADB) {
    return absl::FailedPreconditionError(
        absl::StrCat(context, ": is not a SQLite database (", e.what(), ")"));
  }
  if (code == SQLITE_CORRUPT) {
    return absl::DataLossError(
        absl::StrCat(context, ": the SQLite database is corrupt (", e.what(), ")"));
  }
  if (code == SQLITE_CONSTRAINT) {
    absl::Status exists = absl::AlreadyExistsError(msg);
    // SQLite names the table: "UNIQUE constraint failed: outbox.message_id".
    if (absl::StrContains(e.what(), "constraint failed: outbox.")) {
      exists.SetPayload(kOutboxRowExists, absl::Cord("outbox"));
    }
    return exists;
  }
  if (code == SQLITE_CANTOPEN || code == SQLITE_PERM || code == SQLITE_READONLY)
    return absl::FailedPreconditionError(msg);
  return absl::InternalError(msg);
}

bool IsOutboxRowExists(const absl::Status& status) {
  return absl::IsAlreadyExists(status) && status.GetPayload(kOutboxRowExists).has_value();
}

absl::Status CatchSqlite(const std::string& context, const std::function<absl::Status()>& fn) {
  try {
    return fn();
  } catch (const SQLite::Exception& e) {
    return SqliteError(e, context);
  }
}

namespace {

// The busy handler does not cover every lock a concurrent opener meets:
// PRAGMA journal_mode=WAL on a new file upgrades its read lock to a write
// lock, and while another connection opening the same file holds a read lock
// SQLite returns BUSY at once (in well under a millisecond, whatever the busy
// timeout) instead of risking a deadlock. A producer and its recovery
// started together on a new file failed so 4 times in 20. Opening is idempotent, so openers retry
// BUSY and LOCKED with a short backoff, for at least the busy timeout.
absl::Duration OpenRetryBudget(const DbOptions& options) {
  return std::max(absl::Milliseconds(options.busy_timeout_ms), absl::Seconds(2));
}

absl::Status RetryWhileBusy(absl::Duration budget, const std::function<absl::Status()>& attempt) {
  const absl::Time deadline = absl::Now() + budget;
  absl::Duration backoff = absl::Milliseconds(5);
  while (true) {
    absl::Status s = attempt();  // BUSY and LOCKED come back as UNAVAILABLE
    if (!absl::IsUnavailable(s) || absl::Now() + backoff > deadline) return s;
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Milliseconds(200));
  }
}

// WAL is persistent in the file; the rest is per connection. All of it is
// idempotent, so a busy attempt is simply run again.
absl::Status ApplyPragmas(SQLite::Database& db, const std::string& path, const DbOptions& options) {
  return CatchSqlite(absl::StrCat("open ", path), [&]() -> absl::Status {
    const std::string mode = db.execAndGet("PRAGMA journal_mode=WAL").getString();
    if (mode != "wal") {
      // SQLite keeps the old mode when it cannot take the lock to change it.
      return absl::UnavailableError(
          absl::StrCat("open ", path, ": journal_mode is ", mode, ", could not switch to wal"));
    }
    switch (options.durability) {
      case Durability::kFull: db.exec("PRAGMA synchronous=FULL"); break;
      case Durability::kNormal: db.exec("PRAGMA synchronous=NORMAL"); break;
      case Durability::kOff: db.exec("PRAGMA synchronous=OFF"); break;
    }
    db.exec("PRAGMA foreign_keys=ON");
    // No connection checkpoints by itself: SQLite's automatic checkpoint can
    // meet the WAL-reset race; WalCheckpointer runs each under the write lock.
    db.exec("PRAGMA wal_autocheckpoint=0");
    // A log that grew (a long reader held it) is cut back to this when it
    // starts over, instead of keeping its largest size for good.
    db.exec("PRAGMA journal_size_limit=67108864");
    return absl::OkStatus();
  });
}

// The files hold business records: only the service's user may read
// them. SQLite gives -wal and -shm the mode of the database file, so creating
// that one 0600 (before SQLite creates it with 0644 & ~umask) covers all
// three. An existing file keeps whatever mode its owner chose.
void CreatePrivateFile(const std::string& path) {
  if (path.empty() || path == ":memory:" || path.rfind("file:", 0) == 0) return;
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  // EEXIST and any other failure: SQLite's own open reports what matters.
  if (fd >= 0) ::close(fd);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SQLite::Database>> OpenDatabase(const std::string& path,
                                                               const DbOptions& options) {
  std::unique_ptr<SQLite::Database> db;
  absl::Status s = CatchSqlite(absl::StrCat("open ", path), [&] {
    int flags = SQLite::OPEN_READWRITE | SQLite::OPEN_FULLMUTEX;
    if (options.create_if_missing) {
      flags |= SQLite::OPEN_CREATE;
      CreatePrivateFile(path);
    }
    db = std::make_unique<SQLite::Database>(path, flags, 0, options.vfs);
    db->setBusyTimeout(options.busy_timeout_ms);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  s = RetryWhileBusy(OpenRetryBudget(options), [&] { return ApplyPragmas(*db, path, options); });
  if (!s.ok()) return s;
  return db;
}

absl::StatusOr<std::unique_ptr<SQLite::Database>> OpenDatabaseReadOnly(const std::string& path) {
  try {
    auto db = std::make_unique<SQLite::Database>(path, SQLite::OPEN_READONLY);
    db->setBusyTimeout(5000);
    return db;
  } catch (const SQLite::Exception& e) {
    return SqliteError(e, absl::StrCat("open ", path));
  }
}

absl::Status WriteTransaction(SQLite::Database& db, const std::function<absl::Status()>& body) {
  constexpr int kAttempts = 5;
  absl::Status last;
  for (int attempt = 1; attempt <= kAttempts; ++attempt) {
    try {
      SQLite::Transaction tx(db, SQLite::TransactionBehavior::IMMEDIATE);
      absl::Status s = body();
      if (!s.ok()) return s;  // tx's destructor rolls back
      tx.commit();
      return absl::OkStatus();
    } catch (const SQLite::Exception& e) {
      last = SqliteError(e, "write transaction");
      if (!absl::IsUnavailable(last)) return last;
    }
    // busy_timeout already waited; back off a little more before retrying.
    std::this_thread::sleep_for(std::chrono::milliseconds(20 * attempt));
  }
  return last;
}

absl::StatusOr<std::unique_ptr<SqliteFile>> OpenSqliteFile(const std::string& path,
                                                           const DbOptions& options,
                                                           const DbSchema* schema) {
  if (schema != nullptr) {
    const int peeked = PeekSchemaVersion(path);
    if (peeked > schema->latest()) return NewerSchemaError(path, peeked, *schema);
  }
  auto file = std::make_unique<SqliteFile>();
  auto writer = OpenDatabase(path, options);
  if (!writer.ok()) return writer.status();
  absl::Status s;
  if (schema != nullptr) {
    // Another process may be creating or upgrading the same file right now.
    s = RetryWhileBusy(OpenRetryBudget(options),
                       [&] { return UpgradeSchema(**writer, path, *schema); });
  }
  if (!s.ok()) return s;
  s = CatchSqlite("read the page size", [&] {
    file->page_size_ = (*writer)->execAndGet("PRAGMA page_size").getInt();
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  auto checkpointer = WalCheckpointer::Open(path, options);
  if (!checkpointer.ok()) return checkpointer.status();
  (*checkpointer)->Attach(**writer);
  file->checkpointer_ = std::move(checkpointer).value();
  auto reader = OpenDatabase(path, options);
  if (!reader.ok()) return reader.status();
  {
    MutexLock w(&file->write_mu_);
    file->writer_ = std::move(writer).value();
  }
  {
    MutexLock r(&file->read_mu_);
    file->reader_ = std::move(reader).value();
  }
  return file;
}

absl::Status SqliteFile::Write(const std::function<absl::Status(SQLite::Database&)>& body) {
  MutexLock lock(&write_mu_);
  SQLite::Database& db = *writer_;
  return WriteTransaction(db, [&] { return body(db); });
}

absl::Status SqliteFile::Read(const std::string& context,
                              const std::function<absl::Status(SQLite::Database&)>& body) {
  MutexLock lock(&read_mu_);
  SQLite::Database& db = *reader_;
  return CatchSqlite(context, [&] { return body(db); });
}

absl::Status SqliteFile::WithWriter(const std::string& context,
                                    const std::function<absl::Status(SQLite::Database&)>& body) {
  MutexLock lock(&write_mu_);
  SQLite::Database& db = *writer_;
  return CatchSqlite(context, [&] { return body(db); });
}

}  // namespace outbox
