#pragma once

// SQLite at the storage edge: open with explicit durability, run short write
// transactions with BEGIN IMMEDIATE and retry on SQLITE_BUSY, and turn
// SQLiteCpp's exceptions into absl::Status.
#include <functional>
#include <memory>
#include <string>

#include <SQLiteCpp/SQLiteCpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shared/base/internal/mutex.h"
#include "shared/sqlite/internal/db_options.h"
#include "shared/sqlite/internal/wal_checkpointer.h"
#include "shared/sqlite/schema.h"

namespace outbox {

// Opens a database in WAL mode, creating the file if missing and allowed.
// Safe while other processes open the same file: a lock held by a
// concurrent opener is retried for at least the busy timeout.
absl::StatusOr<std::unique_ptr<SQLite::Database>> OpenDatabase(const std::string& path,
                                                               const DbOptions& options);
absl::StatusOr<std::unique_ptr<SQLite::Database>> OpenDatabaseReadOnly(const std::string& path);

// Runs `body` inside BEGIN IMMEDIATE ... COMMIT. `body` may throw
// SQLite::Exception or return a non-OK status; either rolls back. A busy
// database is retried a few times before UNAVAILABLE is returned.
//
// `body` may run more than once: after SQLITE_BUSY the whole transaction
// starts over. So it must start from the same state each time: whatever it
// learns (a cursor, an id it inserted, a count) goes into variables it
// resets first, and reaches the caller's own state only once this returns
// OK (that is, once the transaction committed).
absl::Status WriteTransaction(SQLite::Database& db, const std::function<absl::Status()>& body);

// Converts the exception being handled into a Status with `context`. A
// constraint is ALREADY_EXISTS; one of the outbox table (a message_id, or a
// biz_type + biz_key, that has a row already) is marked so that
// IsOutboxRowExists tells it from the adopter's own.
absl::Status SqliteError(const SQLite::Exception& e, const std::string& context);

// Whether `status` is the library's ALREADY_EXISTS for a message whose
// message_id, or biz_type + biz_key, has an outbox row already (as
// Producer::Write and SqliteOutbox::Write return it). False for any other
// status, an ALREADY_EXISTS of the adopter's included: one its callback
// returned, or a UNIQUE constraint of its own tables.
bool IsOutboxRowExists(const absl::Status& status);

// Runs `fn` and converts a SQLite::Exception it throws into a Status
// naming `context`. It takes no lock: a connection of a SqliteFile is
// reached through SqliteFile's methods, which hold its mutex.
absl::Status CatchSqlite(const std::string& context, const std::function<absl::Status()>& fn);

// A service's handles on its SQLite file: one writer connection (short
// BEGIN IMMEDIATE transactions), one reader connection (WAL readers never
// block the writer), and the checkpointer, attached to the writer: every
// commit that leaves 1,024 pages in the log is followed by a checkpoint under
// the write lock (wal_checkpointer.h). Each connection is used under its own
// mutex, which only these methods take: Write and Read for a transaction or
// a query; WithWriter for what needs the writer outside one transaction.
// The checkpointer is declared first so that it outlives the writer.
class SqliteFile {
 public:
  // One write transaction on the writer, under its mutex: `body`'s error or
  // a SQLite::Exception rolls back and comes back as a status. `body` may
  // run more than once (after SQLITE_BUSY; see WriteTransaction).
  absl::Status Write(const std::function<absl::Status(SQLite::Database&)>& body);
  // `body` on the reader, under its mutex; a SQLite::Exception comes back
  // as a status naming `context`.
  absl::Status Read(const std::string& context,
                    const std::function<absl::Status(SQLite::Database&)>& body);
  // The escape hatch: `body` on the writer, under its mutex, in no
  // transaction of its own; a SQLite::Exception comes back as a status
  // naming `context`. For what one Write cannot hold: a pragma, statements
  // prepared once and kept across calls (guarded by the writer's mutex, so
  // used only inside Write or WithWriter), or several transactions run
  // back to back with WriteTransaction without another writer between.
  absl::Status WithWriter(const std::string& context,
                          const std::function<absl::Status(SQLite::Database&)>& body);

  // The writer's checkpointer (its log length and skipped checkpoints, for
  // metrics), and the file's page size, read when opened.
  const WalCheckpointer* checkpointer() const { return checkpointer_.get(); }
  int page_size() const { return page_size_; }

 private:
  friend absl::StatusOr<std::unique_ptr<SqliteFile>> OpenSqliteFile(const std::string&,
                                                                    const DbOptions&,
                                                                    const DbSchema*);
  std::unique_ptr<WalCheckpointer> checkpointer_;
  int page_size_ = 4096;
  Mutex write_mu_;
  std::unique_ptr<SQLite::Database> writer_ ABSL_GUARDED_BY(write_mu_);
  Mutex read_mu_;
  std::unique_ptr<SQLite::Database> reader_ ABSL_GUARDED_BY(read_mu_);
};

// Opens the connections and brings the file to `schema`'s latest version on
// the writer (UpgradeSchema, retried while another process holds the file)
// before the others open. A file newer than `schema` is FAILED_PRECONDITION
// and, when its header already says so, refused before SQLite opens it: not
// even a -wal or -shm file appears. A null `schema` creates nothing.
absl::StatusOr<std::unique_ptr<SqliteFile>> OpenSqliteFile(const std::string& path,
                                                           const DbOptions& options,
                                                           const DbSchema* schema);

}  // namespace outbox
