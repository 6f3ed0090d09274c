#include "accounting_service/accounting_db_schema.h"

#include <errno.h>  // program_invocation_short_name
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include "absl/strings/str_cat.h"
#include "accounting_service/booking_for_tests.h"
#include "accounting_service/voucher_store.h"
#include "shared/testing/manual_clock.h"
#include "shared/testing/sequential_ids.h"
#include "shared/testing/sqlite_under_test.h"
#include "shared/testing/status_matchers.h"

namespace outbox::accounting {
namespace {

using ::outbox::testing::OpenAtOnce;

class AccountingDbSchemaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/accounting_db_schema_test.XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return absl::StrCat(dir_, "/", name); }
  absl::StatusOr<std::unique_ptr<VoucherStore>> Open(const std::string& path) {
    return VoucherStore::Open(path, DbOptions{}, ids_, clock_);
  }

  std::string dir_;
  testing::SequentialIds ids_{"v-new-"};
  testing::ManualClock clock_;
};

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

int64_t IndexCount(SQLite::Database& db, const std::string& name) {
  SQLite::Statement s(db, "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = ?");
  s.bind(1, name);
  s.executeStep();
  return s.getColumn(0).getInt64();
}

// Two vouchers, and three processed messages: one a duplicate delivery of a
// booked payment, recorded against its voucher.
void FillAccountingDb(SQLite::Database& db, int version) {
  db.exec(R"sql(
    INSERT INTO vouchers (voucher_id, payment_id, message_id, debit_account, credit_account,
                          amount_minor, currency, created_at)
    VALUES ('v-1', 'p-1', 'm-1', 'acct-alice', 'acct-bob', 100, 'EUR', 3001),
           ('v-2', 'p-2', 'm-2', 'acct-carol', 'acct-bob', 250, 'JPY', 3002);
    INSERT INTO processed_messages (message_id, payment_id, voucher_id, processed_at)
    VALUES ('m-1', 'p-1', 'v-1', 3001), ('m-2', 'p-2', 'v-2', 3002), ('m-1b', 'p-1', 'v-1', 3003);
  )sql");
  if (version >= 2) {
    db.exec(
        "UPDATE vouchers SET traceparent = "
        "'00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' WHERE voucher_id = 'v-2'");
  }
}

TEST_F(AccountingDbSchemaTest, ANewFileGetsTheLatestVersion) {
  const std::string path = Path("accounting.db");
  ASSERT_OK(Open(path));
  SQLite::Database db(path, SQLite::OPEN_READONLY);
  EXPECT_EQ(SchemaVersion(db), 3);
  EXPECT_EQ(AccountingDbSchema().latest(), 3);
  EXPECT_TRUE(db.tableExists("vouchers"));
  EXPECT_TRUE(db.tableExists("processed_messages"));
  EXPECT_EQ(IndexCount(db, "processed_messages_processed_at"), 1);
}

// Versions 1 and 2 as a versioned file would have them, and versions 1 and
// 2 as the code before versioning left them (user_version 0).
TEST_F(AccountingDbSchemaTest, EachEarlierVersionUpgradesWithRowsIntact) {
  const DbSchema& schema = AccountingDbSchema();
  constexpr int kLastUnversioned = 2;  // versioning came with version 2's code
  for (int version = 1; version <= schema.latest(); ++version) {
    for (bool versioned : {true, false}) {
      if (versioned && version == schema.latest()) continue;
      if (!versioned && version > kLastUnversioned) continue;
      SCOPED_TRACE(absl::StrCat("version ", version, versioned ? "" : " unversioned"));
      const std::string path = Path(absl::StrCat("v", version, versioned ? "" : "-0", ".db"));
      {
        SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
        ASSERT_OK(UpgradeSchema(db, path, schema, version));
        FillAccountingDb(db, version);
        if (!versioned) db.exec("PRAGMA user_version = 0");
      }
      auto store = Open(path);
      ASSERT_OK(store);
      auto page = (*store)->List(0, 10);
      ASSERT_OK(page);
      ASSERT_EQ(page->items.size(), 2u);
      EXPECT_EQ(page->items[0].voucher_id, "v-1");
      EXPECT_EQ(page->items[0].payment_id, "p-1");
      EXPECT_EQ(page->items[0].debit_account, "acct-alice");
      EXPECT_EQ(page->items[0].amount_minor, 100);
      EXPECT_EQ(page->items[0].created_at, 3001);
      EXPECT_EQ(page->items[0].traceparent, "");
      EXPECT_EQ(page->items[1].currency, "JPY");
      EXPECT_EQ(page->items[1].traceparent,
                version >= 2 ? "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" : "");
      // The processed ids still deduplicate: both the first delivery and the
      // later duplicate, and a new message for a booked payment books nothing.
      auto again = BookEvents(**store, clock_,
                              {{"m-1", "p-1", "acct-alice", "acct-bob", 100, "EUR"},
                               {"m-1b", "p-1", "acct-alice", "acct-bob", 100, "EUR"},
                               {"m-2c", "p-2", "acct-carol", "acct-bob", 250, "JPY"},
                               {"m-3", "p-3", "acct-dave", "acct-bob", 75, "EUR"}});
      ASSERT_OK(again);
      EXPECT_TRUE((*again)[0].duplicate);
      EXPECT_EQ((*again)[0].reference, "v-1");
      EXPECT_TRUE((*again)[1].duplicate);
      EXPECT_EQ((*again)[1].reference, "v-1");
      EXPECT_TRUE((*again)[2].duplicate);
      EXPECT_EQ((*again)[2].reference, "v-2");
      EXPECT_FALSE((*again)[3].duplicate);
      store->reset();
      SQLite::Database db(path, SQLite::OPEN_READONLY);
      EXPECT_EQ(SchemaVersion(db), schema.latest());
      EXPECT_EQ(db.execAndGet("SELECT count(*) FROM processed_messages").getInt64(), 5);
      EXPECT_EQ(db.execAndGet("SELECT count(*) FROM vouchers").getInt64(), 3);
      EXPECT_EQ(IndexCount(db, "processed_messages_processed_at"), 1);
      // The upgraded file prunes by age, and a pruned id still books nothing.
      store = Open(path);
      ASSERT_OK(store);
      auto pruned = (*store)->PruneProcessed(/*cutoff_ms=*/3003, /*limit=*/10);
      ASSERT_OK(pruned);
      EXPECT_EQ(*pruned, 2);  // m-1 and m-2; m-1b (3003) and the new ones stay
      auto replay =
          BookEvents(**store, clock_, {{"m-1", "p-1", "acct-alice", "acct-bob", 100, "EUR"}});
      ASSERT_OK(replay);
      EXPECT_TRUE((*replay)[0].duplicate);
      EXPECT_EQ((*replay)[0].reference, "v-1");
    }
  }
}

TEST_F(AccountingDbSchemaTest, ANewerFileIsRefusedAndLeftAsItIs) {
  const DbSchema& schema = AccountingDbSchema();
  const std::string path = Path("accounting.db");
  {
    SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec("PRAGMA journal_mode=WAL");
    db.exec("CREATE TABLE vouchers_v9 (id INTEGER PRIMARY KEY)");
    db.exec(absl::StrCat("PRAGMA user_version = ", schema.latest() + 1));
  }
  const std::string before = Bytes(path);
  auto store = Open(path);
  ASSERT_TRUE(absl::IsFailedPrecondition(store.status())) << store.status();
  EXPECT_EQ(store.status().message(),
            absl::StrCat(path, " has schema version ", schema.latest() + 1, "; this ",
                         program_invocation_short_name, " knows up to ", schema.latest(),
                         ": refusing to open a newer file"));
  EXPECT_EQ(Bytes(path), before);
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
}

// Two accounting processes started together on a file from before
// versioning: both come up and the file ends at the latest version.
TEST_F(AccountingDbSchemaTest, ConcurrentOpenersUpgradeAnOldFileOnce) {
  const DbSchema& schema = AccountingDbSchema();
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    const std::string path = Path(absl::StrCat("old", round, ".db"));
    {
      SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
      ASSERT_OK(UpgradeSchema(db, path, schema, 1));
      FillAccountingDb(db, 1);
      db.exec("PRAGMA user_version = 0");
    }
    constexpr int kOpeners = 4;
    std::vector<absl::Status> results = OpenAtOnce(path, kOpeners, schema);
    for (const absl::Status& s : results) EXPECT_OK(s);
    SQLite::Database db(path, SQLite::OPEN_READONLY);
    EXPECT_EQ(SchemaVersion(db), schema.latest());
    EXPECT_EQ(db.execAndGet("SELECT count(*) FROM vouchers").getInt64(), 2);
    EXPECT_EQ(db.execAndGet("SELECT count(*) FROM pragma_table_info('vouchers') "
                            "WHERE name = 'traceparent'")
                  .getInt64(),
              1);
  }
}

}  // namespace
}  // namespace outbox::accounting
