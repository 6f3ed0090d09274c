#include "shared/sqlite/schema.h"

#include <errno.h>  // program_invocation_short_name
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/barrier.h"
#include "service_kit/payment_db_schema.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/sqlite/sqlite_file.h"
#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

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

bool HasColumn(SQLite::Database& db, const std::string& table, const std::string& column) {
  SQLite::Statement stmt(db, "SELECT 1 FROM pragma_table_info(?) WHERE name = ?");
  stmt.bind(1, table);
  stmt.bind(2, column);
  return stmt.executeStep();
}

bool HasIndex(SQLite::Database& db, const std::string& name) {
  SQLite::Statement stmt(db, "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?");
  stmt.bind(1, name);
  return stmt.executeStep();
}

int64_t Count(SQLite::Database& db, const std::string& table) {
  return db.execAndGet(absl::StrCat("SELECT count(*) FROM ", table)).getInt64();
}

std::string ExpectedRefusal(const std::string& path, int version, const DbSchema& schema) {
  return absl::StrCat(path, " has schema version ", version, "; this ",
                      program_invocation_short_name, " knows up to ", schema.latest(),
                      ": refusing to open a newer file");
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

// The rows every earlier payment.db version can hold: one payment per outbox
// status, and (from version 2, which has the archive) one archived SENT row.
// Columns a version lacks are left out of its INSERTs.
void FillPaymentDb(SQLite::Database& db, int version) {
  for (int i = 1; i <= 4; ++i) {
    db.exec(absl::StrCat(
        "INSERT INTO payments (payment_id, idempotency_key, payer_account, payee_account, "
        "amount_minor, currency, description, created_at) VALUES ('p-",
        i, "', 'key-", i, "', 'acct-alice', 'acct-bob', ", 100 * i, ", 'EUR', 'payment ", i, "', ",
        1000 + i, ")"));
  }
  struct Row {
    int n;
    const char* status;
    int attempts;
    int64_t next_retry_at;
    const char* last_error;
    int64_t sent_at;
  };
  for (const Row& r :
       {Row{1, "SENT", 1, 61'001, "", 2001}, Row{2, "SENDING", 3, 95'000, "publish timeout", 0},
        Row{3, "FAILED", 10, 180'000, "no consumer", 0}, Row{4, "SENT", 2, 62'004, "", 2004}}) {
    db.exec(absl::StrCat(
        "INSERT INTO outbox (message_id, biz_type, biz_key, topic, payload, status, attempts, "
        "max_attempts, next_retry_at, last_attempt_at, last_error, created_at, updated_at, "
        "sent_at) VALUES ('m-",
        r.n, "', 'payment', 'p-", r.n, "', 'outbox.payments', x'0a0b0c', '", r.status, "', ",
        r.attempts, ", 10, ", r.next_retry_at, ", ", 1500 + r.n, ", '", r.last_error, "', ",
        1000 + r.n, ", ", 1600 + r.n, ", ", r.sent_at, ")"));
  }
  if (version >= 3) {
    db.exec(
        "UPDATE outbox SET message_type = 'payment.created', reply_to = 'outbox.acks.s0' "
        "WHERE message_id = 'm-2'");
  }
  if (version >= 4) {
    db.exec(
        "UPDATE outbox SET traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' "
        "WHERE message_id = 'm-2'");
  }
  if (version >= 2) {
    db.exec("INSERT INTO outbox_archive SELECT * FROM outbox WHERE message_id = 'm-4'");
    db.exec("DELETE FROM outbox WHERE message_id = 'm-4'");
  }
}

// What FillPaymentDb wrote at `version`, read with today's code.
void ExpectPaymentRows(SQLite::Database& db, int version) {
  // Retention's indexes cover the rows already there.
  EXPECT_EQ(db.execAndGet("SELECT count(*) FROM outbox_archive INDEXED BY outbox_archive_sent_at "
                          "WHERE sent_at > 0")
                .getInt64(),
            version >= 2 ? 1 : 0);
  EXPECT_EQ(Count(db, "outbox_retention"), 0);
  EXPECT_EQ(Count(db, "payments"), 4);
  EXPECT_EQ(Count(db, "outbox"), version >= 2 ? 3 : 4);
  EXPECT_EQ(Count(db, "outbox_archive"), version >= 2 ? 1 : 0);
  OutboxStateTable table(db);
  std::optional<OutboxMessage> sent = table.Load("m-1");
  ASSERT_TRUE(sent.has_value());
  EXPECT_EQ(sent->status, OutboxStatus::kSent);
  EXPECT_EQ(sent->attempts, 1);
  EXPECT_EQ(sent->next_retry_at, 61'001);
  EXPECT_EQ(sent->sent_at, 2001);
  EXPECT_EQ(sent->message_type, "");
  EXPECT_EQ(sent->traceparent, "");
  std::optional<OutboxMessage> sending = table.Load("m-2");
  ASSERT_TRUE(sending.has_value());
  EXPECT_EQ(sending->status, OutboxStatus::kSending);
  EXPECT_EQ(sending->biz_key, "p-2");
  EXPECT_EQ(sending->topic, "outbox.payments");
  EXPECT_EQ(sending->payload, "\x0a\x0b\x0c");
  EXPECT_EQ(sending->attempts, 3);
  EXPECT_EQ(sending->max_attempts, 10);
  EXPECT_EQ(sending->next_retry_at, 95'000);
  EXPECT_EQ(sending->last_attempt_at, 1502);
  EXPECT_EQ(sending->last_error, "publish timeout");
  EXPECT_EQ(sending->created_at, 1002);
  EXPECT_EQ(sending->updated_at, 1602);
  EXPECT_EQ(sending->message_type, version >= 3 ? "payment.created" : "");
  EXPECT_EQ(sending->reply_to, version >= 3 ? "outbox.acks.s0" : "");
  EXPECT_EQ(sending->traceparent,
            version >= 4 ? "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" : "");
  std::optional<OutboxMessage> failed = table.Load("m-3");
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->status, OutboxStatus::kFailed);
  EXPECT_EQ(failed->attempts, 10);
  EXPECT_EQ(failed->next_retry_at, 180'000);
  EXPECT_EQ(failed->last_error, "no consumer");
  EXPECT_EQ(db.execAndGet("SELECT sum(amount_minor) FROM payments").getInt64(), 1000);
  if (version >= 2) {
    SQLite::Statement archived(db,
                               absl::StrCat("SELECT ", kOutboxColumns,
                                            " FROM outbox_archive o WHERE o.message_id = 'm-4'"));
    ASSERT_TRUE(archived.executeStep());
    OutboxMessage row = ReadOutboxMessage(archived);
    EXPECT_EQ(row.status, OutboxStatus::kSent);
    EXPECT_EQ(row.attempts, 2);
    EXPECT_EQ(row.sent_at, 2004);
  }
  // The archive's columns still line up with the outbox's: a row archived now
  // reads back the same.
  db.exec("INSERT INTO outbox_archive SELECT * FROM outbox WHERE message_id = 'm-2'");
  SQLite::Statement copy(db, absl::StrCat("SELECT ", kOutboxColumns,
                                          " FROM outbox_archive o WHERE o.message_id = 'm-2'"));
  ASSERT_TRUE(copy.executeStep());
  OutboxMessage copied = ReadOutboxMessage(copy);
  EXPECT_EQ(copied.last_error, sending->last_error);
  EXPECT_EQ(copied.reply_to, sending->reply_to);
  EXPECT_EQ(copied.traceparent, sending->traceparent);
}

TEST_F(SchemaTest, ANewPaymentDbGetsTheLatestVersion) {
  const std::string path = Path("payment.db");
  auto file = OpenSqliteFile(path, DbOptions{}, &PaymentDbSchema());
  ASSERT_OK(file);
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  EXPECT_EQ(SchemaVersion(db), 6);
  EXPECT_EQ(PaymentDbSchema().latest(), 6);
  for (const char* table : {"payments", "outbox", "outbox_archive", "recovery_lease",
                            "outbox_history", "outbox_audit", "outbox_retention"}) {
    EXPECT_TRUE(db.tableExists(table)) << table;
  }
  EXPECT_TRUE(HasIndex(db, "outbox_status_next_retry"));
  EXPECT_TRUE(HasIndex(db, "outbox_sent_at"));
  EXPECT_TRUE(HasIndex(db, "outbox_failure_group"));
  EXPECT_TRUE(HasIndex(db, "outbox_archive_sent_at"));
  EXPECT_TRUE(HasIndex(db, "outbox_audit_at"));
  for (const char* table : {"outbox", "outbox_archive"}) {
    for (const char* column : {"message_type", "reply_to", "traceparent"}) {
      EXPECT_TRUE(HasColumn(db, table, column)) << table << "." << column;
    }
  }
}

// Another producer's outbox (CreateOutboxTable) and payment.db's, grown by
// its migrations, have the same columns: the same adapters serve both.
TEST_F(SchemaTest, CreateOutboxTableMatchesThePaymentDbOutbox) {
  auto payment = OpenSqliteFile(Path("payment.db"), DbOptions{}, &PaymentDbSchema());
  ASSERT_OK(payment);
  SQLite::Database other(Path("other.db"), SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  CreateOutboxTable(other);
  CreateOutboxTable(other);  // a second time changes nothing
  auto columns = [](SQLite::Database& db) {
    std::set<std::string> out;
    SQLite::Statement stmt(db,
                           "SELECT name || ' ' || type || ' ' || \"notnull\" || ' ' || "
                           "ifnull(dflt_value, '') || ' ' || pk FROM pragma_table_info('outbox')");
    while (stmt.executeStep()) out.insert(stmt.getColumn(0).getString());
    return out;
  };
  SQLite::Database db(Path("payment.db"), SQLite::OPEN_READONLY);
  EXPECT_EQ(columns(other), columns(db));
  auto schema_objects = [](SQLite::Database& db) {
    std::set<std::string> out;
    SQLite::Statement stmt(
        db,
        "SELECT type || ' ' || name FROM sqlite_master WHERE name LIKE 'outbox%' "
        "OR name = 'recovery_lease'");
    while (stmt.executeStep()) out.insert(stmt.getColumn(0).getString());
    return out;
  };
  EXPECT_EQ(schema_objects(other), schema_objects(db));
  EXPECT_TRUE(HasIndex(other, "outbox_status_next_retry"));
  EXPECT_TRUE(HasIndex(other, "outbox_archive_sent_at"));
}

// Every earlier version, both as a versioned file would have it and as the
// code before versioning left it (user_version 0), upgrades in place with
// every row intact. The latest version unversioned is the newest file made
// before versioning.
TEST_F(SchemaTest, EachEarlierPaymentDbVersionUpgradesWithRowsIntact) {
  const DbSchema& schema = PaymentDbSchema();
  for (int version = 1; version <= schema.latest(); ++version) {
    for (bool versioned : {true, false}) {
      if (versioned && version == schema.latest()) continue;
      SCOPED_TRACE(absl::StrCat("version ", version, versioned ? "" : " unversioned"));
      const std::string path = Path(absl::StrCat("v", version, versioned ? "" : "-0", ".db"));
      {
        SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        ASSERT_OK(UpgradeSchema(db, path, schema, version));
        ASSERT_EQ(SchemaVersion(db), version);
        FillPaymentDb(db, version);
        if (!versioned) db.exec("PRAGMA user_version = 0");
      }
      auto file = OpenSqliteFile(path, DbOptions{}, &schema);
      ASSERT_OK(file);
      file->reset();
      SQLite::Database db(path, SQLite::OPEN_READWRITE);
      EXPECT_EQ(SchemaVersion(db), schema.latest());
      ExpectPaymentRows(db, version);
      // Today's writer works on it.
      OutboxMessage fresh;
      fresh.message_id = "m-5";
      fresh.biz_type = "payment";
      fresh.biz_key = "p-5";
      fresh.topic = "outbox.payments";
      fresh.traceparent = "00-1af7651916cd43dd8448eb211c80319c-c7ad6b7169203331-01";
      EXPECT_GT(OutboxInserter(db).Insert(fresh), 0);
    }
  }
}

TEST_F(SchemaTest, ANewerFileIsRefusedAndLeftAsItIs) {
  const DbSchema& schema = PaymentDbSchema();
  const std::string path = Path("payment.db");
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
  const DbSchema& schema = PaymentDbSchema();
  const std::string path = Path("payment.db");
  SQLite::Database newer(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  newer.exec("PRAGMA journal_mode=WAL");
  newer.exec("PRAGMA wal_autocheckpoint=0");
  newer.exec("CREATE TABLE from_the_future (id INTEGER PRIMARY KEY)");
  newer.exec(absl::StrCat("PRAGMA user_version = ", schema.latest() + 1));
  ASSERT_EQ(PeekSchemaVersion(path), 0);

  auto file = OpenSqliteFile(path, DbOptions{}, &schema);
  ASSERT_TRUE(absl::IsFailedPrecondition(file.status())) << file.status();
  EXPECT_EQ(file.status().message(), ExpectedRefusal(path, schema.latest() + 1, schema));
  EXPECT_FALSE(newer.tableExists("payments"));
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
    std::vector<absl::Status> results(kOpeners);
    absl::Barrier* start = new absl::Barrier(kOpeners);  // the last one through deletes it
    std::vector<std::thread> threads;
    for (int i = 0; i < kOpeners; ++i) {
      threads.emplace_back([&, i] {
        if (start->Block()) delete start;
        results[i] = OpenSqliteFile(path, DbOptions{}, &schema).status();
      });
    }
    for (std::thread& t : threads) t.join();
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
