// The database fixtures (tests/fixtures/db: payment.db and accounting.db as
// each schema before versioning left them) upgraded by today's stores, every
// row read back; and outbox_check knows the versions the services write.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "accounting_service/accounting_db_schema.h"
#include "accounting_service/booking_for_tests.h"
#include "accounting_service/voucher_store.h"
#include "checker/consistency_check.h"
#include "payment_service/payment_store.h"
#include "service_kit/payment_db_schema.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/testing/manual_clock.h"
#include "shared/testing/sequential_ids.h"
#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

constexpr char kTraceparent[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

class SchemaFixturesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/schema_fixtures_test.XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A copy to upgrade: the committed fixture stays as it is.
  std::string Copy(const std::string& fixture) {
    const std::string from = absl::StrCat(OUTBOX_SOURCE_DIR, "/tests/fixtures/db/", fixture);
    const std::string to = absl::StrCat(dir_, "/", fixture);
    std::filesystem::copy_file(from, to);
    return to;
  }

  std::string dir_;
};

int64_t Scalar(SQLite::Database& db, const std::string& sql) {
  return db.execAndGet(sql).getInt64();
}

TEST_F(SchemaFixturesTest, TheFixturesPredateVersioning) {
  struct Fixture {
    const char* name;
    int tables;
  };
  for (const Fixture& f : {Fixture{"payment-v1.db", 3}, Fixture{"payment-v2.db", 4},
                           Fixture{"payment-v3.db", 4}, Fixture{"payment-v4.db", 4},
                           Fixture{"accounting-v1.db", 2}, Fixture{"accounting-v2.db", 2}}) {
    const std::string path = Copy(f.name);
    SQLite::Database db(path, SQLite::OPEN_READONLY);
    EXPECT_EQ(SchemaVersion(db), 0) << f.name;
    EXPECT_EQ(Scalar(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table'"), f.tables)
        << f.name;
  }
}

TEST_F(SchemaFixturesTest, EachPaymentDbUpgradesWithEveryRowIntact) {
  for (int version = 1; version <= 4; ++version) {
    SCOPED_TRACE(absl::StrCat("payment-v", version, ".db"));
    const std::string path = Copy(absl::StrCat("payment-v", version, ".db"));
    auto store = payment::PaymentStore::Open(path, DbOptions{});
    ASSERT_OK(store);

    // Through today's store: a payment with its outbox row.
    auto sending = (*store)->Get("pay-fixture-2");
    ASSERT_OK(sending);
    EXPECT_EQ(sending->input.idempotency_key, "key-fixture-2");
    EXPECT_EQ(sending->input.payer_account, "acct-carol");
    EXPECT_EQ(sending->input.amount_minor, 990);
    EXPECT_EQ(sending->input.currency, "EUR");
    EXPECT_EQ(sending->input.description, "books");
    EXPECT_EQ(sending->created_at, 1700000002000);
    EXPECT_EQ(sending->outbox.message_id, "msg-fixture-2");
    EXPECT_EQ(sending->outbox.status, OutboxStatus::kSending);
    EXPECT_EQ(sending->outbox.attempts, 3);
    EXPECT_EQ(sending->outbox.max_attempts, 10);
    EXPECT_EQ(sending->outbox.next_retry_at, 1700000095000);
    EXPECT_EQ(sending->outbox.last_attempt_at, 1700000035000);
    EXPECT_EQ(sending->outbox.last_error, "publish: no confirm within 5s");
    EXPECT_EQ(sending->outbox.topic, "PAY_QUEUE");
    EXPECT_EQ(sending->outbox.payload, "\x0a\x0dpay-fixture-2");
    EXPECT_EQ(sending->outbox.message_type, version >= 3 ? "PaymentCreated" : "");
    EXPECT_EQ(sending->outbox.reply_to, version >= 3 ? "ACC_QUEUE" : "");
    EXPECT_EQ(sending->outbox.traceparent, version >= 4 ? kTraceparent : "");
    EXPECT_EQ(sending->outbox.restarted_at, 0);  // no history: never re-driven
    auto sent = (*store)->Get("pay-fixture-1");
    ASSERT_OK(sent);
    EXPECT_EQ(sent->outbox.status, OutboxStatus::kSent);
    EXPECT_EQ(sent->outbox.attempts, 1);
    EXPECT_EQ(sent->outbox.next_retry_at, 1700000061000);
    EXPECT_EQ(sent->outbox.sent_at, 1700000001400);
    auto failed = (*store)->Get("pay-fixture-3");
    ASSERT_OK(failed);
    EXPECT_EQ(failed->input.amount_minor, 50000);
    EXPECT_EQ(failed->outbox.status, OutboxStatus::kFailed);
    EXPECT_EQ(failed->outbox.attempts, 10);
    EXPECT_EQ(failed->outbox.next_retry_at, 1700000900000);
    EXPECT_EQ(failed->outbox.last_error, "gave up after 10 attempts");
    store->reset();

    // Every table, directly.
    SQLite::Database db(path, SQLite::OPEN_READONLY);
    EXPECT_EQ(SchemaVersion(db), PaymentDbSchema().latest());
    EXPECT_EQ(Scalar(db, "SELECT count(*) FROM payments"), 4);
    EXPECT_EQ(Scalar(db, "SELECT sum(amount_minor) FROM payments"), 1250 + 990 + 50000 + 75);
    EXPECT_EQ(Scalar(db, "SELECT count(*) FROM outbox WHERE status = 'SENDING'"), 1);
    EXPECT_EQ(Scalar(db, "SELECT count(*) FROM outbox WHERE status = 'FAILED'"), 1);
    // From version 2 on, retention had moved the second SENT row to the archive.
    EXPECT_EQ(Scalar(db, "SELECT count(*) FROM outbox WHERE status = 'SENT'"),
              version >= 2 ? 1 : 2);
    EXPECT_EQ(Scalar(db, "SELECT count(*) FROM outbox_archive"), version >= 2 ? 1 : 0);
    // Retention's index covers the archived row; nothing is pruned yet.
    EXPECT_EQ(Scalar(db,
                     "SELECT count(*) FROM outbox_archive INDEXED BY outbox_archive_sent_at "
                     "WHERE sent_at < 1700000034501"),
              version >= 2 ? 1 : 0);
    EXPECT_EQ(Scalar(db, "SELECT count(*) FROM outbox_retention"), 0);
    SQLite::Statement fourth(db, absl::StrCat("SELECT ", kOutboxColumns, " FROM ",
                                              version >= 2 ? "outbox_archive" : "outbox",
                                              " o WHERE o.message_id = 'msg-fixture-4'"));
    ASSERT_TRUE(fourth.executeStep());
    OutboxMessage row = ReadOutboxMessage(fourth);
    EXPECT_EQ(row.biz_key, "pay-fixture-4");
    EXPECT_EQ(row.status, OutboxStatus::kSent);
    EXPECT_EQ(row.attempts, 2);
    EXPECT_EQ(row.next_retry_at, 1700000064000);
    EXPECT_EQ(row.sent_at, 1700000034500);
    EXPECT_EQ(row.message_type, version >= 3 ? "PaymentCreated" : "");
    SQLite::Statement lease(
        db, "SELECT holder, expires_at FROM recovery_lease WHERE name = 'recovery'");
    ASSERT_TRUE(lease.executeStep());
    EXPECT_EQ(lease.getColumn(0).getString(), "host-a-4242");
    EXPECT_EQ(lease.getColumn(1).getInt64(), 1700000010000);
  }
}

TEST_F(SchemaFixturesTest, EachAccountingDbUpgradesWithEveryRowIntact) {
  for (int version = 1; version <= 2; ++version) {
    SCOPED_TRACE(absl::StrCat("accounting-v", version, ".db"));
    const std::string path = Copy(absl::StrCat("accounting-v", version, ".db"));
    testing::SequentialIds ids("vch-new-");
    testing::ManualClock clock(1'700'001'000'000);
    auto store = accounting::VoucherStore::Open(path, DbOptions{}, ids, clock);
    ASSERT_OK(store);
    auto page = (*store)->List(0, 10);
    ASSERT_OK(page);
    ASSERT_EQ(page->items.size(), 2u);
    const accounting::Voucher& first = page->items[0];
    EXPECT_EQ(first.voucher_id, "vch-fixture-1");
    EXPECT_EQ(first.payment_id, "pay-fixture-1");
    EXPECT_EQ(first.message_id, "msg-fixture-1");
    EXPECT_EQ(first.debit_account, "acct-alice");
    EXPECT_EQ(first.credit_account, "acct-bob");
    EXPECT_EQ(first.amount_minor, 1250);
    EXPECT_EQ(first.currency, "EUR");
    EXPECT_EQ(first.created_at, 1700000001200);
    EXPECT_EQ(first.traceparent, "");
    auto fourth = (*store)->GetByPayment("pay-fixture-4");
    ASSERT_OK(fourth);
    EXPECT_EQ(fourth->voucher_id, "vch-fixture-4");
    EXPECT_EQ(fourth->amount_minor, 75);
    EXPECT_EQ(fourth->currency, "USD");
    EXPECT_EQ(fourth->traceparent, version >= 2 ? kTraceparent : "");
    // The processed ids still deduplicate, the redelivery's included.
    auto again = accounting::BookEvents(
        **store, clock,
        {{"msg-fixture-1-again", "pay-fixture-1", "acct-alice", "acct-bob", 1250, "EUR"},
         {"msg-fixture-4", "pay-fixture-4", "acct-alice", "acct-erin", 75, "USD"}});
    ASSERT_OK(again);
    EXPECT_TRUE((*again)[0].duplicate);
    EXPECT_EQ((*again)[0].reference, "vch-fixture-1");
    EXPECT_TRUE((*again)[1].duplicate);
    EXPECT_EQ((*again)[1].reference, "vch-fixture-4");
    store->reset();

    SQLite::Database db(path, SQLite::OPEN_READONLY);
    EXPECT_EQ(SchemaVersion(db), accounting::AccountingDbSchema().latest());
    EXPECT_EQ(Scalar(db, "SELECT count(*) FROM vouchers"), 2);
    EXPECT_EQ(Scalar(db,
                     "SELECT count(*) FROM sqlite_master "
                     "WHERE type = 'index' AND name = 'processed_messages_processed_at'"),
              1);
    std::set<std::string> processed;
    SQLite::Statement ids_stmt(db, "SELECT message_id, voucher_id FROM processed_messages");
    while (ids_stmt.executeStep()) {
      processed.insert(
          absl::StrCat(ids_stmt.getColumn(0).getString(), "->", ids_stmt.getColumn(1).getString()));
    }
    EXPECT_EQ(processed, (std::set<std::string>{"msg-fixture-1->vch-fixture-1",
                                                "msg-fixture-1-again->vch-fixture-1",
                                                "msg-fixture-4->vch-fixture-4"}));
  }
}

// The upgraded pair passes the audit: the upgrade lost no payment, voucher or
// outbox row, nor the archive the audit counts as sent.
TEST_F(SchemaFixturesTest, TheUpgradedNewestPairIsConsistent) {
  const std::string payment_db = Copy("payment-v4.db");
  const std::string accounting_db = Copy("accounting-v2.db");
  testing::SequentialIds ids("vch-new-");
  testing::ManualClock clock(1'700'001'000'000);
  ASSERT_OK(payment::PaymentStore::Open(payment_db, DbOptions{}));
  ASSERT_OK(accounting::VoucherStore::Open(accounting_db, DbOptions{}, ids, clock));
  checker::CheckConfig config;
  config.payment_db = payment_db;
  config.accounting_db = accounting_db;
  config.fail_on_stale = false;  // the SENDING row is years old
  auto report = checker::RunChecks(config, absl::FromUnixMillis(1'700'001'000'000));
  ASSERT_OK(report);
  EXPECT_TRUE(report->ok());
  EXPECT_EQ(report->counts.payments, 4);
  EXPECT_EQ(report->counts.outbox_sent, 1);
  EXPECT_EQ(report->counts.outbox_archived, 1);
  EXPECT_EQ(report->counts.outbox_pruned, 0);
  EXPECT_EQ(report->archive_pruned_before, 0);
  EXPECT_EQ(report->counts.vouchers, 2);
  EXPECT_EQ(report->counts.processed_messages, 3);
}

// outbox_check keeps its own copy of the versions (it shares no code with
// the services); this is where the copies must agree.
TEST(SchemaVersionsTest, TheCheckerKnowsTheVersionsTheServicesWrite) {
  EXPECT_EQ(checker::kPaymentDbSchemaVersion, PaymentDbSchema().latest());
  EXPECT_EQ(checker::kAccountingDbSchemaVersion, accounting::AccountingDbSchema().latest());
}

}  // namespace
}  // namespace outbox
