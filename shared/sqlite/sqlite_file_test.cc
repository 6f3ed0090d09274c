#include "shared/sqlite/sqlite_file.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/barrier.h"
#include "shared/sqlite/outbox_table.h"

namespace outbox {
namespace {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/sqlite_file_test.XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

bool HasColumn(SQLite::Database& db, const std::string& table, const std::string& column) {
  SQLite::Statement stmt(db, absl::StrCat("SELECT 1 FROM pragma_table_info('", table,
                                          "') WHERE name = ?"));
  stmt.bind(1, column);
  return stmt.executeStep();
}

// Opens `path` from `openers` threads released at the same moment; returns
// each opener's status.
std::vector<absl::Status> OpenAtOnce(const std::string& path, int openers) {
  std::vector<absl::Status> results(openers);
  absl::Barrier* start = new absl::Barrier(openers);  // the last one through deletes it
  std::vector<std::thread> threads;
  for (int i = 0; i < openers; ++i) {
    threads.emplace_back([&, i] {
      if (start->Block()) delete start;
      auto file = OpenSqliteFile(path, DbOptions{}, CreateOutboxSchema);
      results[i] = file.status();
    });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

TEST(SqliteFileTest, ParsesDurability) {
  EXPECT_EQ(*ParseDurability("full"), Durability::kFull);
  EXPECT_EQ(*ParseDurability("NORMAL"), Durability::kNormal);
  EXPECT_TRUE(absl::IsInvalidArgument(ParseDurability("fast").status()));
}

// Payment and recovery (and a restarted payment) may open one new file at the
// same moment: every opener comes up, none sees "database is locked".
TEST(SqliteFileTest, ConcurrentOpenersOfANewFileAllSucceed) {
  constexpr int kRounds = 20;
  constexpr int kOpeners = 4;
  TempDir dir;
  for (int round = 0; round < kRounds; ++round) {
    const std::string path = absl::StrCat(dir.path(), "/round", round, ".db");
    std::vector<absl::Status> results = OpenAtOnce(path, kOpeners);
    for (int i = 0; i < kOpeners; ++i) {
      EXPECT_TRUE(results[i].ok()) << "round " << round << " opener " << i << ": " << results[i];
    }
    SQLite::Database db(path, SQLite::OPEN_READONLY);
    EXPECT_EQ(db.execAndGet("PRAGMA journal_mode").getString(), "wal");
    EXPECT_TRUE(db.tableExists("outbox"));
  }
}

// Files from before message_type and reply_to get them once, however many
// processes open the file at the same moment.
TEST(SqliteFileTest, ConcurrentOpenersMigrateAnOldFileOnce) {
  TempDir dir;
  for (int round = 0; round < 5; ++round) {
    const std::string path = absl::StrCat(dir.path(), "/old", round, ".db");
    {
      SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
      db.exec(R"sql(
        CREATE TABLE outbox (
          id INTEGER PRIMARY KEY, message_id TEXT NOT NULL UNIQUE, biz_type TEXT NOT NULL,
          biz_key TEXT NOT NULL, topic TEXT NOT NULL, payload BLOB NOT NULL,
          status TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
          max_attempts INTEGER NOT NULL, next_retry_at INTEGER NOT NULL,
          last_attempt_at INTEGER NOT NULL DEFAULT 0, last_error TEXT NOT NULL DEFAULT '',
          created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,
          sent_at INTEGER NOT NULL DEFAULT 0, UNIQUE (biz_type, biz_key));
        CREATE TABLE outbox_archive AS SELECT * FROM outbox WHERE 0;
      )sql");
    }
    std::vector<absl::Status> results = OpenAtOnce(path, 4);
    for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << "round " << round << ": " << s;
    SQLite::Database db(path, SQLite::OPEN_READONLY);
    for (const char* table : {"outbox", "outbox_archive"}) {
      EXPECT_TRUE(HasColumn(db, table, "message_type")) << table;
      EXPECT_TRUE(HasColumn(db, table, "reply_to")) << table;
    }
  }
}

TEST(SqliteFileTest, WithoutCreateAMissingFileIsRefusedAndNotCreated) {
  TempDir dir;
  const std::string path = dir.path() + "/missing.db";
  DbOptions options;
  options.create_if_missing = false;
  auto file = OpenSqliteFile(path, options, nullptr);
  EXPECT_TRUE(absl::IsFailedPrecondition(file.status())) << file.status();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(SqliteFileTest, MissingOutboxSchemaNamesWhatIsMissing) {
  TempDir dir;
  SQLite::Database db(dir.path() + "/x.db", SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  EXPECT_EQ(MissingOutboxSchema(db), "table outbox");
  CreateOutboxSchema(db);
  EXPECT_EQ(MissingOutboxSchema(db), "");
  db.exec("DROP INDEX outbox_status_next_retry");
  EXPECT_EQ(MissingOutboxSchema(db), "index outbox_status_next_retry");
}

}  // namespace
}  // namespace outbox
