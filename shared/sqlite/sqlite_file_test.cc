#include "shared/sqlite/sqlite_file.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <csignal>
#include <fstream>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/testing/sqlite_under_test.h"
#include "shared/testing/status_matchers.h"
#include "shared/testing/temp_dir.h"

namespace outbox {
namespace {

using ::outbox::testing::OpenAtOnce;
using ::outbox::testing::StatusIs;
using ::testing::HasSubstr;

// A producer's file: the library's outbox tables, then a table of its own.
const DbSchema& ProducerSchema() {
  static const DbSchema* const schema = new DbSchema{{
      {"outbox tables", CreateOutboxTable},
      {"orders",
       [](SQLite::Database& db) { db.exec("CREATE TABLE orders (id TEXT PRIMARY KEY)"); }},
  }};
  return *schema;
}

TEST(SqliteFileTest, WriteCommitsOrRollsBackAndReadSeesWhatCommitted) {
  TempDir dir("sqlite_file_write_read");
  auto file = OpenSqliteFile(dir.path() + "/f.db", {}, nullptr);
  ASSERT_OK(file);
  SqliteFile& f = **file;
  ASSERT_OK(f.Write([](SQLite::Database& tx) {
    tx.exec("CREATE TABLE t (v INTEGER)");
    tx.exec("INSERT INTO t VALUES (1)");
    return absl::OkStatus();
  }));
  // An error of the body's, or a SQLite exception, rolls everything back.
  EXPECT_EQ(f.Write([](SQLite::Database& tx) {
    tx.exec("INSERT INTO t VALUES (2)");
    return absl::AlreadyExistsError("mine");
  }),
            absl::AlreadyExistsError("mine"));
  absl::Status thrown = f.Write([](SQLite::Database& tx) {
    tx.exec("INSERT INTO t VALUES (3)");
    tx.exec("INSERT INTO no_such_table VALUES (4)");
    return absl::OkStatus();
  });
  EXPECT_FALSE(thrown.ok());
  int64_t sum = 0;
  ASSERT_OK(f.Read("sum", [&](SQLite::Database& db) {
    sum = db.execAndGet("SELECT sum(v) FROM t").getInt64();
    return absl::OkStatus();
  }));
  EXPECT_EQ(sum, 1);
  absl::Status bad = f.Read("a bad read", [](SQLite::Database& db) {
    db.exec("SELECT * FROM no_such_table");
    return absl::OkStatus();
  });
  EXPECT_NE(bad.message().find("a bad read"), absl::string_view::npos) << bad;
}

TEST(SqliteFileTest, ParsesDurability) {
  EXPECT_EQ(*ParseDurability("full"), Durability::kFull);
  EXPECT_EQ(*ParseDurability("NORMAL"), Durability::kNormal);
  EXPECT_TRUE(absl::IsInvalidArgument(ParseDurability("fast").status()));
}

// A producer and its recovery (and a restarted producer) may open one new file at the
// same moment: every opener comes up, none sees "database is locked".
TEST(SqliteFileTest, ConcurrentOpenersOfANewFileAllSucceed) {
  constexpr int kRounds = 20;
  constexpr int kOpeners = 4;
  TempDir dir("sqlite_file_test");
  for (int round = 0; round < kRounds; ++round) {
    const std::string path = absl::StrCat(dir.path(), "/round", round, ".db");
    std::vector<absl::Status> results = OpenAtOnce(path, kOpeners, ProducerSchema());
    for (int i = 0; i < kOpeners; ++i) {
      EXPECT_OK(results[i]) << "round " << round << " opener " << i;
    }
    SQLite::Database db(path, SQLite::OPEN_READONLY);
    EXPECT_EQ(db.execAndGet("PRAGMA journal_mode").getString(), "wal");
    EXPECT_TRUE(db.tableExists("outbox"));
    EXPECT_EQ(SchemaVersion(db), ProducerSchema().latest());
  }
}

TEST(SqliteFileTest, WithoutCreateAMissingFileIsRefusedAndNotCreated) {
  TempDir dir("sqlite_file_test");
  const std::string path = dir.path() + "/missing.db";
  DbOptions options;
  options.create_if_missing = false;
  auto file = OpenSqliteFile(path, options, nullptr);
  EXPECT_TRUE(absl::IsFailedPrecondition(file.status())) << file.status();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(SqliteFileTest, MapsResourceAndFileErrors) {
  EXPECT_TRUE(
      absl::IsResourceExhausted(SqliteError(SQLite::Exception("full", SQLITE_FULL), "commit")));
  // EFBIG (a file size limit) reaches SQLite as a failed write.
  EXPECT_TRUE(absl::IsResourceExhausted(
      SqliteError(SQLite::Exception("disk I/O error", SQLITE_IOERR_WRITE), "commit")));
  absl::Status notadb =
      SqliteError(SQLite::Exception("file is not a database", SQLITE_NOTADB), "open /x/payment.db");
  EXPECT_TRUE(absl::IsFailedPrecondition(notadb));
  EXPECT_NE(notadb.message().find("/x/payment.db: is not a SQLite database"), std::string::npos)
      << notadb;
  EXPECT_TRUE(
      absl::IsDataLoss(SqliteError(SQLite::Exception("malformed", SQLITE_CORRUPT), "read")));
  // Other I/O errors are the disk's, not the statement's: passing, as a lock.
  EXPECT_TRUE(
      absl::IsUnavailable(SqliteError(SQLite::Exception("read", SQLITE_IOERR_READ), "read")));
  EXPECT_TRUE(
      absl::IsUnavailable(SqliteError(SQLite::Exception("fsync", SQLITE_IOERR_FSYNC), "commit")));
  EXPECT_TRUE(absl::IsAlreadyExists(
      SqliteError(SQLite::Exception("UNIQUE", SQLITE_CONSTRAINT_UNIQUE), "insert")));
  EXPECT_TRUE(absl::IsInternal(SqliteError(SQLite::Exception("no such table", SQLITE_ERROR), "x")));
}

mode_t ModeOf(const std::string& path) {
  struct stat st = {};
  if (stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 0777;
}

TEST(SqliteFileTest, CreatesPrivateFiles) {
  TempDir dir("sqlite_file_test");
  const std::string path = dir.path() + "/private.db";
  auto file = OpenSqliteFile(path, DbOptions{}, &ProducerSchema());
  ASSERT_OK(file);
  EXPECT_EQ(ModeOf(path), 0600u);
  EXPECT_EQ(ModeOf(path + "-wal"), 0600u);
  EXPECT_EQ(ModeOf(path + "-shm"), 0600u);
}

TEST(SqliteFileTest, RefusesAFileThatIsNotADatabase) {
  TempDir dir("sqlite_file_test");
  const std::string path = dir.path() + "/payment.db";
  std::ofstream(path) << "these are not the pages you are looking for\n";
  auto db = OpenDatabase(path, DbOptions{});
  ASSERT_THAT(db, StatusIs(absl::StatusCode::kFailedPrecondition,
                           HasSubstr(path + ": is not a SQLite database")));
}

// Lowers this process's file size limit for its lifetime (SIGXFSZ ignored,
// as the services do), so writes past it fail with EFBIG.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit lowered = saved_;
    lowered.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &lowered);
  }
  ~FileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit saved_{};
  void (*old_handler_)(int) = SIG_DFL;
};

int64_t CountRows(SQLite::Database& db) {
  return db.execAndGet("SELECT count(*) FROM t").getInt64();
}

// The writer never pauses, as under a steady load. Its commits past 1,024
// pages checkpoint under the write lock (wal_checkpointer.h), so the log
// starts over instead of keeping everything written (~48 MiB here).
TEST(SqliteFileTest, TheWritersCheckpointStartsTheLogOverUnderASteadyLoad) {
  TempDir dir("sqlite_file_test");
  const std::string path = dir.path() + "/steady.db";
  const DbSchema schema{{{"table t", [](SQLite::Database& db) {
                            db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, b BLOB NOT NULL)");
                          }}}};
  auto file = OpenSqliteFile(path, DbOptions{Durability::kOff}, &schema);
  ASSERT_OK(file);
  for (int i = 0; i < 6000; ++i) {  // ~2 pages each
    absl::Status s = (*file)->Write([](SQLite::Database& db) {
      db.exec("INSERT INTO t (b) VALUES (randomblob(3000))");
      return absl::OkStatus();
    });
    ASSERT_OK(s);
  }
  // 1,024 pages are 4 MiB, and a commit's few pages on.
  EXPECT_LT(std::filesystem::file_size(path + "-wal"), 6u << 20);
  EXPECT_EQ((*file)->checkpointer()->skipped(), 0);
}

TEST(SqliteFileTest, AFullDiskRollsBackAndRecovers) {
  TempDir dir("sqlite_file_test");
  auto db = OpenDatabase(dir.path() + "/full.db", DbOptions{});
  ASSERT_OK(db);
  (*db)->exec("CREATE TABLE t (b BLOB NOT NULL)");
  auto insert = [&] {
    return WriteTransaction(**db, [&] {
      (*db)->exec("INSERT INTO t VALUES (randomblob(6000))");
      (*db)->exec("INSERT INTO t VALUES (randomblob(6000))");
      return absl::OkStatus();
    });
  };
  int64_t committed = 0;
  absl::Status full;
  {
    FileSizeLimit limit(256 * 1024);
    for (int i = 0; i < 200 && full.ok(); ++i) {
      full = insert();
      if (full.ok()) committed += 2;
    }
  }
  // SQLITE_FULL or a failed write (EFBIG): either is RESOURCE_EXHAUSTED.
  ASSERT_THAT(full, StatusIs(absl::StatusCode::kResourceExhausted))
      << "never hit the 256 KiB limit";
  EXPECT_GT(committed, 0);
  // The failed transaction left nothing behind; with room again, writes work.
  EXPECT_EQ(CountRows(**db), committed);
  ASSERT_OK(insert());
  EXPECT_EQ(CountRows(**db), committed + 2);
}

}  // namespace
}  // namespace outbox
