// payment.db's schema (payment_db_schema.h): a new file gets the latest
// version, every earlier version upgrades in place with its rows, and its
// outbox is the library's (CreateOutboxTable). The library's own schema
// machinery is tested in shared/sqlite/schema_test.cc.
#include "service_kit/payment_db_schema.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shared/sqlite/internal/audit.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/sqlite/sqlite_file.h"
#include "shared/testing/sqlite_under_test.h"
#include "shared/testing/status_matchers.h"
#include "shared/testing/temp_dir.h"

namespace outbox {
namespace {

using ::outbox::testing::OpenAtOnce;

class SchemaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/payment_db_schema_test.XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return absl::StrCat(dir_, "/", name); }

  std::string dir_;
};

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
  if (version >= 5) {
    // m-2 re-driven twice (the newest counts), m-3 only retried.
    db.exec(
        "INSERT INTO outbox_history (message_id, at, instance, event, detail) VALUES "
        "('m-2', 1200, 'alice', 'redriven', 'by alice'), "
        "('m-2', 1300, 'rec-1', 'republished', 'attempt 1'), "
        "('m-2', 1400, 'bob', 'redriven', 'by bob'), "
        "('m-2', 1500, 'rec-1', 'republished', 'attempt 2'), "
        "('m-3', 1450, 'rec-1', 'republished', 'attempt 10')");
  }
  if (version >= 7) db.exec("UPDATE outbox SET restarted_at = 1400 WHERE message_id = 'm-2'");
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
  // Its newest re-drive, from the history the versions before 7 kept it in.
  EXPECT_EQ(sending->restarted_at, version >= 5 ? 1400 : 0);
  std::optional<OutboxMessage> failed = table.Load("m-3");
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->status, OutboxStatus::kFailed);
  EXPECT_EQ(failed->attempts, 10);
  EXPECT_EQ(failed->next_retry_at, 180'000);
  EXPECT_EQ(failed->last_error, "no consumer");
  EXPECT_EQ(failed->restarted_at, 0);
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
  EXPECT_EQ(copied.restarted_at, sending->restarted_at);
}

TEST_F(SchemaTest, ANewPaymentDbGetsTheLatestVersion) {
  const std::string path = Path("payment.db");
  auto file = OpenSqliteFile(path, DbOptions{}, &PaymentDbSchema());
  ASSERT_OK(file);
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  EXPECT_EQ(SchemaVersion(db), 7);
  EXPECT_EQ(PaymentDbSchema().latest(), 7);
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
    for (const char* column : {"message_type", "reply_to", "traceparent", "restarted_at"}) {
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
  EXPECT_TRUE(HasColumn(other, "outbox_audit", "reason"));
  EXPECT_TRUE(HasColumn(db, "outbox_audit", "reason"));
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
      // And today's audit trail, with the operator's reason.
      AppendAudit(db, {0, 1, "alice", "redrive_message", "m-5", false, 1, "ok", "ticket 42"});
      EXPECT_EQ(ListAudit(db, 0, 1).at(0).reason, "ticket 42");
    }
  }
}

// A file from before versioning and before message_type, reply_to and
// traceparent gets them once, however many processes open it at the same
// moment.
TEST(SqliteFileTest, ConcurrentOpenersMigrateAnOldFileOnce) {
  TempDir dir("sqlite_file_test");
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
    std::vector<absl::Status> results = OpenAtOnce(path, 4, PaymentDbSchema());
    for (const absl::Status& s : results) EXPECT_OK(s) << "round " << round;
    SQLite::Database db(path, SQLite::OPEN_READONLY);
    for (const char* table : {"outbox", "outbox_archive"}) {
      EXPECT_TRUE(HasColumn(db, table, "message_type")) << table;
      EXPECT_TRUE(HasColumn(db, table, "reply_to")) << table;
      EXPECT_TRUE(HasColumn(db, table, "traceparent")) << table;
    }
    EXPECT_EQ(SchemaVersion(db), PaymentDbSchema().latest());
  }
}

}  // namespace
}  // namespace outbox
