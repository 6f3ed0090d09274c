#include "shared/sqlite/internal/wal_checkpointer.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <string>

#include "shared/sqlite/sqlite_file.h"
#include "shared/testing/status_matchers.h"
#include "shared/testing/temp_dir.h"

namespace outbox {
namespace {

// A VFS over SQLite's default one that runs a trap inside a checkpoint.
// SQLite calls xUnfetch(0, 0) on the database file right after a checkpoint
// has read a changed log header and before it reads how much of the log is
// copied: the window of the WAL-reset race, widened to whatever the trap does.
constexpr char kTrapVfs[] = "outbox_trap";
sqlite3_vfs* g_default = nullptr;
std::function<void()> g_trap;  // runs once, at the next xUnfetch(0, 0)

struct TrapFile {
  sqlite3_file base;
  sqlite3_file* real;
};

sqlite3_file* Real(sqlite3_file* f) {
  return reinterpret_cast<TrapFile*>(f)->real;
}

int TrapClose(sqlite3_file* f) {
  const int rc = Real(f)->pMethods->xClose(Real(f));
  sqlite3_free(Real(f));
  return rc;
}
int TrapRead(sqlite3_file* f, void* b, int n, sqlite3_int64 o) {
  return Real(f)->pMethods->xRead(Real(f), b, n, o);
}
int TrapWrite(sqlite3_file* f, const void* b, int n, sqlite3_int64 o) {
  return Real(f)->pMethods->xWrite(Real(f), b, n, o);
}
int TrapTruncate(sqlite3_file* f, sqlite3_int64 s) {
  return Real(f)->pMethods->xTruncate(Real(f), s);
}
int TrapSync(sqlite3_file* f, int flags) {
  return Real(f)->pMethods->xSync(Real(f), flags);
}
int TrapFileSize(sqlite3_file* f, sqlite3_int64* s) {
  return Real(f)->pMethods->xFileSize(Real(f), s);
}
int TrapLock(sqlite3_file* f, int l) {
  return Real(f)->pMethods->xLock(Real(f), l);
}
int TrapUnlock(sqlite3_file* f, int l) {
  return Real(f)->pMethods->xUnlock(Real(f), l);
}
int TrapCheckReserved(sqlite3_file* f, int* out) {
  return Real(f)->pMethods->xCheckReservedLock(Real(f), out);
}
int TrapFileControl(sqlite3_file* f, int op, void* arg) {
  return Real(f)->pMethods->xFileControl(Real(f), op, arg);
}
int TrapSectorSize(sqlite3_file* f) {
  return Real(f)->pMethods->xSectorSize(Real(f));
}
int TrapDevice(sqlite3_file* f) {
  return Real(f)->pMethods->xDeviceCharacteristics(Real(f));
}
int TrapShmMap(sqlite3_file* f, int i, int size, int extend, void volatile** p) {
  return Real(f)->pMethods->xShmMap(Real(f), i, size, extend, p);
}
int TrapShmLock(sqlite3_file* f, int offset, int n, int flags) {
  return Real(f)->pMethods->xShmLock(Real(f), offset, n, flags);
}
void TrapShmBarrier(sqlite3_file* f) {
  Real(f)->pMethods->xShmBarrier(Real(f));
}
int TrapShmUnmap(sqlite3_file* f, int del) {
  return Real(f)->pMethods->xShmUnmap(Real(f), del);
}
int TrapFetch(sqlite3_file* f, sqlite3_int64 o, int n, void** p) {
  return Real(f)->pMethods->xFetch(Real(f), o, n, p);
}
int TrapUnfetch(sqlite3_file* f, sqlite3_int64 o, void* p) {
  if (o == 0 && p == nullptr && g_trap) {
    auto trap = std::move(g_trap);
    g_trap = nullptr;
    trap();
  }
  return Real(f)->pMethods->xUnfetch(Real(f), o, p);
}

const sqlite3_io_methods kTrapMethods = {3,
                                         TrapClose,
                                         TrapRead,
                                         TrapWrite,
                                         TrapTruncate,
                                         TrapSync,
                                         TrapFileSize,
                                         TrapLock,
                                         TrapUnlock,
                                         TrapCheckReserved,
                                         TrapFileControl,
                                         TrapSectorSize,
                                         TrapDevice,
                                         TrapShmMap,
                                         TrapShmLock,
                                         TrapShmBarrier,
                                         TrapShmUnmap,
                                         TrapFetch,
                                         TrapUnfetch};

int TrapOpen(sqlite3_vfs*, const char* name, sqlite3_file* f, int flags, int* out_flags) {
  auto* file = reinterpret_cast<TrapFile*>(f);
  file->real = static_cast<sqlite3_file*>(sqlite3_malloc(g_default->szOsFile));
  if (file->real == nullptr) return SQLITE_NOMEM;
  std::memset(file->real, 0, g_default->szOsFile);
  const int rc = g_default->xOpen(g_default, name, file->real, flags, out_flags);
  if (rc != SQLITE_OK) {
    sqlite3_free(file->real);
    f->pMethods = nullptr;
    return rc;
  }
  f->pMethods = &kTrapMethods;
  return rc;
}

void RegisterTrapVfs() {
  static sqlite3_vfs vfs;
  if (g_default != nullptr) return;
  g_default = sqlite3_vfs_find(nullptr);
  vfs = *g_default;
  vfs.zName = kTrapVfs;
  vfs.szOsFile = sizeof(TrapFile);
  vfs.xOpen = TrapOpen;
  vfs.pNext = nullptr;
  ASSERT_EQ(sqlite3_vfs_register(&vfs, 0), SQLITE_OK);
}

std::string IntegrityCheck(const std::string& path) {
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  SQLite::Statement check(db, "PRAGMA integrity_check");
  std::string out;
  while (check.executeStep()) out += check.getColumn(0).getString() + ";";
  return out;
}

// The race as SQLite's own test of it (walrestart.test) sets it up: a table
// with an index, its log completely copied; then a checkpoint whose trap
// lets the writer start the log over with a small commit; then a large
// commit that grows the log past the old one's end and a checkpoint of it.
class WalResetRaceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RegisterTrapVfs();
    DbOptions options;
    options.busy_timeout_ms = 50;  // the trap's write must not wait out the checkpoint
    auto writer = OpenDatabase(path_, options);
    ASSERT_OK(writer);
    writer_ = std::move(writer).value();
    writer_->exec("CREATE TABLE t1 (a INTEGER PRIMARY KEY, b BLOB)");
    writer_->exec(
        "WITH s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 20) "
        "INSERT INTO t1 SELECT NULL, randomblob(600) FROM s");
    writer_->exec("CREATE INDEX i1 ON t1 (b)");
    writer_->exec("PRAGMA wal_checkpoint");
  }

  // Before the checkpoint under test: the log holds a large commit, copied
  // completely by another checkpoint, which the checkpointing connection has
  // not seen yet.
  void FillAndCopyTheLog() {
    writer_->exec("UPDATE t1 SET b = randomblob(600)");
    writer_->exec("PRAGMA wal_checkpoint");
  }

  // Arms the trap: inside the next checkpoint, the writer commits a small
  // change (starting the log over, when it can). Returns where the commit's
  // result code goes.
  void ArmTrap() {
    trap_rc_ = -1;
    g_trap = [this] {
      trap_rc_ = sqlite3_exec(writer_->getHandle(), "UPDATE t1 SET b = randomblob(600) WHERE a < 5",
                              nullptr, nullptr, nullptr);
    };
  }

  // After the checkpoint under test: the small change (if the trap could not
  // commit it), a large commit past the old log's end, and its checkpoint.
  void GrowAndCopy(const std::function<void()>& checkpoint) {
    if (trap_rc_ != SQLITE_OK) writer_->exec("UPDATE t1 SET b = randomblob(600) WHERE a < 5");
    writer_->exec("UPDATE t1 SET b = randomblob(600)");
    checkpoint();
  }

  TempDir dir_{"wal_checkpointer_test"};
  const std::string path_ = dir_.path() + "/race.db";
  std::unique_ptr<SQLite::Database> writer_;
  int trap_rc_ = -1;
};

// What the checkpointer guards against is real in the SQLite this runs on:
// a plain PASSIVE checkpoint (SQLite's automatic one is that) corrupts the
// file. Fixed upstream in 3.51.3 and in the 3.44 line's 3.44.6; every other
// version from 3.7.0 on has the race.
TEST_F(WalResetRaceTest, APlainCheckpointCorruptsTheFileOnThisSqlite) {
  const int version = sqlite3_libversion_number();
  if (version >= 3051003 || (version >= 3044006 && version < 3045000)) {
    GTEST_SKIP() << "SQLite " << sqlite3_libversion() << " carries the upstream fix";
  }
  SQLite::Database checkpointing(path_, SQLite::OPEN_READWRITE, 0, kTrapVfs);
  checkpointing.exec("PRAGMA wal_autocheckpoint=0");
  checkpointing.execAndGet("SELECT count(*) FROM t1");
  FillAndCopyTheLog();
  ArmTrap();
  checkpointing.exec("PRAGMA wal_checkpoint(PASSIVE)");
  ASSERT_EQ(trap_rc_, SQLITE_OK) << "the trap never ran or its commit failed";
  GrowAndCopy([&] { checkpointing.exec("PRAGMA wal_checkpoint(PASSIVE)"); });
  EXPECT_NE(IntegrityCheck(path_), "ok;");
}

TEST_F(WalResetRaceTest, TheCheckpointerHoldsTheWriteLockSoTheLogCannotStartOverMeanwhile) {
  auto checkpointer = WalCheckpointer::Open(path_, DbOptions{}, kCheckpointFrames, kTrapVfs);
  ASSERT_OK(checkpointer);
  FillAndCopyTheLog();
  ArmTrap();
  auto done = (*checkpointer)->CheckpointNow();
  ASSERT_OK(done);
  EXPECT_FALSE(g_trap) << "the trap never ran";
  EXPECT_EQ(trap_rc_, SQLITE_BUSY) << "the writer committed during the checkpoint";
  GrowAndCopy([&] {
    auto again = (*checkpointer)->CheckpointNow();
    ASSERT_OK(again);
    EXPECT_GT(again->log_frames, 0);
    EXPECT_EQ(again->copied_frames, again->log_frames);  // nobody reads: all of it
  });
  EXPECT_EQ(IntegrityCheck(path_), "ok;");
  EXPECT_EQ((*checkpointer)->skipped(), 0);
}

TEST(WalCheckpointerTest, AWriteLockHeldElsewhereSkipsTheCheckpointAndCountsIt) {
  TempDir dir("wal_checkpointer_test");
  const std::string path = dir.path() + "/busy.db";
  auto writer = OpenDatabase(path, DbOptions{});
  ASSERT_OK(writer);
  (*writer)->exec("CREATE TABLE t (b BLOB)");
  (*writer)->exec("INSERT INTO t VALUES (randomblob(9000))");
  auto checkpointer = WalCheckpointer::Open(path, DbOptions{});
  ASSERT_OK(checkpointer);
  (*writer)->exec("BEGIN IMMEDIATE");
  auto busy = (*checkpointer)->CheckpointNow();
  EXPECT_TRUE(absl::IsUnavailable(busy.status())) << busy.status();
  EXPECT_EQ((*checkpointer)->skipped(), 1);
  (*writer)->exec("ROLLBACK");
  auto done = (*checkpointer)->CheckpointNow();
  ASSERT_OK(done);
  EXPECT_EQ(done->copied_frames, done->log_frames);
  EXPECT_GT(done->log_frames, 0);
}

TEST(WalCheckpointerTest, NoConnectionCheckpointsByItself) {
  TempDir dir("wal_checkpointer_test");
  auto db = OpenDatabase(dir.path() + "/auto.db", DbOptions{});
  ASSERT_OK(db);
  EXPECT_EQ((*db)->execAndGet("PRAGMA wal_autocheckpoint").getInt(), 0);
}

// The attached writer's commits past `frames` checkpoint on their own
// thread: the log is copied completely and the next commit starts it over.
TEST(WalCheckpointerTest, TheAttachedWritersCommitsKeepTheLogSmall) {
  TempDir dir("wal_checkpointer_test");
  const std::string path = dir.path() + "/steady.db";
  auto writer = OpenDatabase(path, DbOptions{Durability::kOff});
  ASSERT_OK(writer);
  (*writer)->exec("CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB NOT NULL)");
  auto checkpointer = WalCheckpointer::Open(path, DbOptions{Durability::kOff}, 256);
  ASSERT_OK(checkpointer);
  (*checkpointer)->Attach(**writer);
  for (int i = 0; i < 3000; ++i) {  // ~2 pages each: ~24 MiB of log without checkpoints
    absl::Status s = WriteTransaction(**writer, [&] {
      (*writer)->exec("INSERT INTO t (b) VALUES (randomblob(3000))");
      return absl::OkStatus();
    });
    ASSERT_OK(s);
  }
  // 256 pages are 1 MiB; the log starts over right after each checkpoint.
  EXPECT_LT(std::filesystem::file_size(path + "-wal"), 2u << 20);
  EXPECT_EQ((*checkpointer)->skipped(), 0);
  EXPECT_EQ(IntegrityCheck(path), "ok;");
}

// A reader that keeps an old snapshot open: checkpoints cannot copy past it
// and the log cannot start over, so it grows with every commit (what
// outbox_sqlite_wal_bytes shows and OutboxWalNotCheckpointed alerts on).
// Once the reader ends, the next checkpoint copies everything and the next
// commit starts the log over: it is short again.
TEST(WalCheckpointerTest, AReaderPinningASnapshotKeepsTheLogLongUntilItEnds) {
  TempDir dir("wal_checkpointer_test");
  const std::string path = dir.path() + "/pinned.db";
  auto writer = OpenDatabase(path, DbOptions{Durability::kOff});
  ASSERT_OK(writer);
  (*writer)->exec("CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB NOT NULL)");
  constexpr int kFrames = 64;
  auto checkpointer = WalCheckpointer::Open(path, DbOptions{Durability::kOff}, kFrames);
  ASSERT_OK(checkpointer);
  (*checkpointer)->Attach(**writer);
  auto commit_some = [&](int n) {
    for (int i = 0; i < n; ++i) {
      absl::Status s = WriteTransaction(**writer, [&] {
        (*writer)->exec("INSERT INTO t (b) VALUES (randomblob(3000))");
        return absl::OkStatus();
      });
      ASSERT_OK(s);
    }
  };
  commit_some(10);
  auto reader = OpenDatabase(path, DbOptions{});
  ASSERT_OK(reader);
  (*reader)->exec("BEGIN");
  ASSERT_GT((*reader)->execAndGet("SELECT count(*) FROM t").getInt(), 0);  // the snapshot starts

  commit_some(400);  // ~800 pages, far past kFrames: every checkpoint stops at the snapshot
  const int pinned = (*checkpointer)->log_frames();
  EXPECT_GT(pinned, 8 * kFrames) << "the log could not start over while the snapshot was held";
  auto partial = (*checkpointer)->CheckpointNow();
  ASSERT_OK(partial);
  EXPECT_LT(partial->copied_frames, partial->log_frames);

  (*reader)->exec("COMMIT");  // the snapshot ends
  auto whole = (*checkpointer)->CheckpointNow();
  ASSERT_OK(whole);
  EXPECT_EQ(whole->copied_frames, whole->log_frames);
  commit_some(1);  // starts the log over
  EXPECT_LT((*checkpointer)->log_frames(), kFrames);
  EXPECT_EQ((*checkpointer)->skipped(), 0);
  EXPECT_EQ(IntegrityCheck(path), "ok;");
}

}  // namespace
}  // namespace outbox
