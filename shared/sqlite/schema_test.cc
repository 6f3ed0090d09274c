#include "shared/sqlite/schema.h"

#include <errno.h>  // program_invocation_short_name
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/sqlite/sqlite_file.h"
#include "shared/testing/sqlite_under_test.h"
#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

using ::outbox::testing::OpenAtOnce;

using ::outbox::testing::StatusIs;
using ::testing::HasSubstr;

class SchemaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/schema_test.XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return absl::StrCat(dir_, "/", name); }

  std::string dir_;
};

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string ExpectedRefusal(const std::string& path, int version, const DbSchema& schema) {
  return absl::StrCat(path, " has schema version ", version, "; this ",
                      program_invocation_short_name, " knows up to ", schema.latest(),
                      ": refusing to open a newer file");
}

// A producer's schema in three versions: the library's outbox tables, then
// a business table, then a column on it.
const DbSchema& ProducerSchema() {
  static const DbSchema* const schema = new DbSchema{{
      {"outbox tables", CreateOutboxTable},
      {"orders",
       [](SQLite::Database& db) { db.exec("CREATE TABLE orders (id TEXT PRIMARY KEY)"); }},
      {"orders.note",
       [](SQLite::Database& db) {
         AddColumnIfMissing(db, "orders", "note", "TEXT NOT NULL DEFAULT ''");
       }},
  }};
  return *schema;
}

// A file in WAL mode, closed cleanly (no -wal or -shm left), whose
// user_version is `version`.
void MakeFileAtVersion(const std::string& path, int version) {
  SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  db.exec("PRAGMA journal_mode=WAL");
  db.exec("CREATE TABLE from_the_future (id INTEGER PRIMARY KEY, what TEXT)");
  db.exec("INSERT INTO from_the_future (what) VALUES ('unknown to this binary')");
  db.exec(absl::StrCat("PRAGMA user_version = ", version));
}

TEST_F(SchemaTest, ANewerFileIsRefusedAndLeftAsItIs) {
  const DbSchema& schema = ProducerSchema();
  const std::string path = Path("producer.db");
  MakeFileAtVersion(path, schema.latest() + 3);
  const std::string before = Bytes(path);
  ASSERT_FALSE(before.empty());
  EXPECT_EQ(PeekSchemaVersion(path), schema.latest() + 3);

  auto file = OpenSqliteFile(path, DbOptions{}, &schema);
  ASSERT_TRUE(absl::IsFailedPrecondition(file.status())) << file.status();
  EXPECT_EQ(file.status().message(), ExpectedRefusal(path, schema.latest() + 3, schema));
  EXPECT_EQ(Bytes(path), before);
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
  EXPECT_FALSE(std::filesystem::exists(path + "-shm"));
}

// The header can be behind: a version set by a commit still in the WAL. The
// check inside the transaction catches it, before anything changes.
TEST_F(SchemaTest, ANewerVersionStillInTheWalIsRefusedToo) {
  const DbSchema& schema = ProducerSchema();
  const std::string path = Path("producer.db");
  SQLite::Database newer(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  newer.exec("PRAGMA journal_mode=WAL");
  newer.exec("PRAGMA wal_autocheckpoint=0");
  newer.exec("CREATE TABLE from_the_future (id INTEGER PRIMARY KEY)");
  newer.exec(absl::StrCat("PRAGMA user_version = ", schema.latest() + 1));
  ASSERT_EQ(PeekSchemaVersion(path), 0);

  auto file = OpenSqliteFile(path, DbOptions{}, &schema);
  ASSERT_TRUE(absl::IsFailedPrecondition(file.status())) << file.status();
  EXPECT_EQ(file.status().message(), ExpectedRefusal(path, schema.latest() + 1, schema));
  EXPECT_FALSE(newer.tableExists("orders"));
  EXPECT_FALSE(newer.tableExists("outbox"));
  EXPECT_EQ(SchemaVersion(newer), schema.latest() + 1);
}

TEST_F(SchemaTest, PeekReadsTheHeaderOnly) {
  EXPECT_EQ(PeekSchemaVersion(Path("missing.db")), 0);
  std::ofstream(Path("text.db"))
      << "not a database, but long enough to have a header if it were one "
         "................................................\n";
  EXPECT_EQ(PeekSchemaVersion(Path("text.db")), 0);
  MakeFileAtVersion(Path("v9.db"), 9);
  EXPECT_EQ(PeekSchemaVersion(Path("v9.db")), 9);
}

// Each migration records itself; openers released together on new files
// between them apply each exactly once, and all come up.
TEST_F(SchemaTest, ConcurrentOpenersApplyEachMigrationOnce) {
  DbSchema schema;
  schema.migrations.push_back({"table applied", [](SQLite::Database& db) {
                                 db.exec("CREATE TABLE applied (version INTEGER NOT NULL)");
                                 db.exec("INSERT INTO applied VALUES (1)");
                               }});
  for (int v = 2; v <= 5; ++v) {
    schema.migrations.push_back({absl::StrCat("step ", v), [v](SQLite::Database& db) {
                                   db.exec(absl::StrCat("INSERT INTO applied VALUES (", v, ")"));
                                 }});
  }
  constexpr int kOpeners = 6;
  for (int round = 0; round < 10; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    const std::string path = Path(absl::StrCat("counted", round, ".db"));
    std::vector<absl::Status> results = OpenAtOnce(path, kOpeners, schema);
    for (const absl::Status& s : results) EXPECT_OK(s);
    SQLite::Database db(path, SQLite::OPEN_READONLY);
    EXPECT_EQ(SchemaVersion(db), 5);
    SQLite::Statement applied(
        db, "SELECT version, count(*) FROM applied GROUP BY version ORDER BY version");
    int expected = 1;
    while (applied.executeStep()) {
      EXPECT_EQ(applied.getColumn(0).getInt(), expected++);
      EXPECT_EQ(applied.getColumn(1).getInt(), 1) << "migration " << expected - 1;
    }
    EXPECT_EQ(expected, 6);
  }
}

TEST_F(SchemaTest, AFailedMigrationChangesNothing) {
  DbSchema schema;
  schema.migrations.push_back(
      {"table a", [](SQLite::Database& db) { db.exec("CREATE TABLE a (x INTEGER)"); }});
  schema.migrations.push_back({"table b, then a mistake", [](SQLite::Database& db) {
                                 db.exec("CREATE TABLE b (x INTEGER)");
                                 db.exec("INSERT INTO no_such_table VALUES (1)");
                               }});
  const std::string path = Path("broken.db");
  auto file = OpenSqliteFile(path, DbOptions{}, &schema);
  // The migration's SQL error (SQLITE_ERROR) is INTERNAL, named by the step that failed.
  ASSERT_THAT(file, StatusIs(absl::StatusCode::kInternal,
                             HasSubstr(absl::StrCat("upgrade ", path, " from schema version 1"))));
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  EXPECT_EQ(SchemaVersion(db), 1);
  EXPECT_TRUE(db.tableExists("a"));
  EXPECT_FALSE(db.tableExists("b"));
}

}  // namespace
}  // namespace outbox
