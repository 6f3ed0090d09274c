#include "checker/consistency_check.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "checker/report.h"

namespace outbox::checker {
namespace {

// Copied verbatim from the services, so the checker is tested on the real shape.
constexpr char kPaymentSchema[] = R"sql(
CREATE TABLE payments (id INTEGER PRIMARY KEY, payment_id TEXT NOT NULL UNIQUE, idempotency_key TEXT NOT NULL UNIQUE, payer_account TEXT NOT NULL, payee_account TEXT NOT NULL, amount_minor INTEGER NOT NULL CHECK (amount_minor > 0), currency TEXT NOT NULL, description TEXT NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE outbox (id INTEGER PRIMARY KEY, message_id TEXT NOT NULL UNIQUE, biz_type TEXT NOT NULL, biz_key TEXT NOT NULL, topic TEXT NOT NULL, payload BLOB NOT NULL, status TEXT NOT NULL CHECK (status IN ('SENDING','SENT','FAILED')), attempts INTEGER NOT NULL DEFAULT 0, max_attempts INTEGER NOT NULL, next_retry_at INTEGER NOT NULL, last_attempt_at INTEGER NOT NULL DEFAULT 0, last_error TEXT NOT NULL DEFAULT '', created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, sent_at INTEGER NOT NULL DEFAULT 0, UNIQUE (biz_type, biz_key));
CREATE INDEX outbox_status_next_retry ON outbox (status, next_retry_at);
CREATE TABLE recovery_lease (name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires_at INTEGER NOT NULL);
)sql";
// What retention adds (payment.db version 6): the archive's index and the
// watermarks.
constexpr char kRetentionSchema[] = R"sql(
CREATE TABLE outbox_archive AS SELECT * FROM outbox WHERE 0;
CREATE INDEX outbox_archive_sent_at ON outbox_archive (sent_at);
CREATE TABLE outbox_retention (name TEXT PRIMARY KEY, pruned_before INTEGER NOT NULL, pruned_rows INTEGER NOT NULL);
)sql";
constexpr char kAccountingSchema[] = R"sql(
CREATE TABLE vouchers (id INTEGER PRIMARY KEY, voucher_id TEXT NOT NULL UNIQUE, payment_id TEXT NOT NULL UNIQUE, message_id TEXT NOT NULL, debit_account TEXT NOT NULL, credit_account TEXT NOT NULL, amount_minor INTEGER NOT NULL CHECK (amount_minor > 0), currency TEXT NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE processed_messages (message_id TEXT PRIMARY KEY, payment_id TEXT NOT NULL, voucher_id TEXT NOT NULL, processed_at INTEGER NOT NULL) WITHOUT ROWID;
)sql";

const absl::Time kNow = absl::FromUnixMillis(1'700'000'000'000);
const int64_t kNowMs = absl::ToUnixMillis(kNow);

class CheckerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (std::filesystem::temp_directory_path() / "outbox_check_XXXXXX").string();
    dir_ = mkdtemp(tmpl.data());
    config_.payment_db = dir_ + "/payment.db";
    config_.accounting_db = dir_ + "/accounting.db";
    const int rw = SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE;
    pay_ = std::make_unique<SQLite::Database>(config_.payment_db, rw);
    acc_ = std::make_unique<SQLite::Database>(config_.accounting_db, rw);
    // WAL, like the services: the checker must read while they hold the files.
    pay_->exec("PRAGMA journal_mode=WAL");
    acc_->exec("PRAGMA journal_mode=WAL");
    pay_->exec(kPaymentSchema);
    acc_->exec(kAccountingSchema);
  }
  void TearDown() override {
    pay_.reset();
    acc_.reset();
    std::filesystem::remove_all(dir_);
  }

  void Payment(const std::string& id, int64_t amount = 100, const std::string& currency = "EUR",
               int64_t created_at = kNowMs) {
    pay_->exec(absl::StrCat(
        "INSERT INTO payments (payment_id, idempotency_key, payer_account, "
        "payee_account, amount_minor, currency, description, created_at) "
        "VALUES ('",
        id, "', 'k-", id, "', 'a', 'b', ", amount, ", '", currency, "', '', ", created_at, ")"));
  }
  void Outbox(const std::string& payment_id, const std::string& status,
              absl::Duration age = absl::Seconds(5)) {
    pay_->exec(
        absl::StrCat("INSERT INTO outbox (message_id, biz_type, biz_key, topic, payload, status, "
                     "max_attempts, next_retry_at, created_at, updated_at) VALUES ('m-",
                     payment_id, "', 'payment', '", payment_id, "', 'PAY_QUEUE', x'00', '", status,
                     "', 5, 0, ", absl::ToUnixMillis(kNow - age), ", 0)"));
  }
  void Voucher(const std::string& payment_id, int64_t amount = 100,
               const std::string& currency = "EUR", std::string message_id = "") {
    if (message_id.empty()) message_id = "m-" + payment_id;
    acc_->exec(
        absl::StrCat("INSERT INTO vouchers (voucher_id, payment_id, message_id, "
                     "debit_account, credit_account, amount_minor, currency, created_at) "
                     "VALUES ('v-",
                     payment_id, "-", ++vouchers_, "', '", payment_id, "', '", message_id,
                     "', 'a', 'b', ", amount, ", '", currency, "', 0)"));
    acc_->exec(absl::StrCat("INSERT OR IGNORE INTO processed_messages VALUES ('", message_id,
                            "', '", payment_id, "', 'v', 0)"));
  }
  // The whole happy path: payment + row, accounted, acked.
  void Sent(const std::string& id) {
    Payment(id);
    Outbox(id, "SENT");
    Voucher(id);
  }
  Report Check() {
    absl::StatusOr<Report> report = RunChecks(config_, kNow);
    EXPECT_TRUE(report.ok()) << report.status();
    return report.ok() ? *report : Report{};
  }
  static int64_t CountOf(const Report& r, const std::string& name) {
    const CheckResult* c = r.Find(name);
    EXPECT_NE(c, nullptr) << name;
    return c == nullptr ? -1 : c->count;
  }
  // Every check but `name` must be clean: each violation is detected by one check.
  static void ExpectOnly(const Report& r, const std::string& name, int64_t count) {
    for (const CheckResult& c : r.checks) {
      EXPECT_EQ(c.count, c.name == name ? count : 0) << c.name;
    }
    EXPECT_FALSE(r.ok());
  }
  int Exit(bool json = false) {
    out_.str("");
    err_.str("");
    return RunAndPrint(config_, kNow, json, out_, err_);
  }

  std::string dir_;
  CheckConfig config_;
  std::unique_ptr<SQLite::Database> pay_;
  std::unique_ptr<SQLite::Database> acc_;
  int vouchers_ = 0;
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(CheckerTest, ConsistentDataIsOk) {
  Sent("p1");
  Sent("p2");
  Payment("p3");
  Outbox("p3", "SENDING");  // in flight
  Payment("p4");
  Outbox("p4", "SENDING");
  Voucher("p4");  // accounted, ack pending
  Payment("p5");
  Outbox("p5", "FAILED");

  Report r = Check();
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.counts.payments, 5);
  EXPECT_EQ(r.counts.outbox_sending, 2);
  EXPECT_EQ(r.counts.outbox_sent, 2);
  EXPECT_EQ(r.counts.outbox_failed, 1);
  EXPECT_EQ(r.counts.vouchers, 3);
  EXPECT_EQ(r.counts.processed_messages, 3);
  EXPECT_EQ(r.sending_with_voucher, 1);
  EXPECT_EQ(r.checks.size(), 9u);
  for (const CheckResult& c : r.checks) EXPECT_EQ(c.count, 0) << c.name;
  EXPECT_EQ(Exit(), kExitOk);
  EXPECT_TRUE(absl::StrContains(out_.str(), "result: OK")) << out_.str();
}

TEST_F(CheckerTest, PaymentWithoutOutbox) {
  Sent("p1");
  Payment("p2");
  Report r = Check();
  ExpectOnly(r, "payment_without_outbox", 1);
  EXPECT_EQ(r.Find("payment_without_outbox")->examples, std::vector<std::string>{"p2"});
  EXPECT_EQ(Exit(), kExitViolation);
}

TEST_F(CheckerTest, OutboxWithoutPayment) {
  Outbox("p1", "SENDING");
  ExpectOnly(Check(), "outbox_without_payment", 1);
}

TEST_F(CheckerTest, SentWithoutVoucher) {
  Payment("p1");
  Outbox("p1", "SENT");
  ExpectOnly(Check(), "sent_without_voucher", 1);
}

TEST_F(CheckerTest, FailedWithVoucher) {
  Sent("p1");
  Payment("p2");
  Outbox("p2", "FAILED");
  Voucher("p2");  // delivered after all: its acknowledgement should have closed the row
  ExpectOnly(Check(), "failed_with_voucher", 1);
}

TEST_F(CheckerTest, VoucherWithoutPayment) {
  Voucher("ghost");
  ExpectOnly(Check(), "voucher_without_payment", 1);
}

// Payment shards share one accounting db: shard 0's check skips the
// vouchers of shard 1's payments, and still sees its own missing ones.
TEST_F(CheckerTest, APaymentShardOwnsOnlyTheVouchersOfItsPrefix) {
  Sent("s0-a");
  Voucher("s1-b");  // shard 1's payment, in the shared accounting db
  ExpectOnly(Check(), "voucher_without_payment", 1);
  config_.payment_id_prefix = "s0-";
  EXPECT_TRUE(Check().ok());
  Voucher("s0-ghost");
  const Report r = Check();
  ExpectOnly(r, "voucher_without_payment", 1);
  EXPECT_EQ(r.Find("voucher_without_payment")->examples, std::vector<std::string>{"s0-ghost"});
}

TEST_F(CheckerTest, APaymentIdPrefixMustNameAShard) {
  for (const char* bad : {"s-", "x0-", "s0", "s0'-", "s1x-"}) {
    config_.payment_id_prefix = bad;
    EXPECT_EQ(RunChecks(config_, kNow).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST_F(CheckerTest, PaymentWithTwoVouchers) {
  // The real schema forbids it, so drop the UNIQUE to simulate a regression.
  std::string schema = kAccountingSchema;
  absl::StrReplaceAll({{"payment_id TEXT NOT NULL UNIQUE", "payment_id TEXT NOT NULL"}}, &schema);
  acc_->exec("DROP TABLE vouchers; DROP TABLE processed_messages");
  acc_->exec(schema);
  Sent("p1");
  Voucher("p1");
  ExpectOnly(Check(), "payment_multiple_vouchers", 1);
}

TEST_F(CheckerTest, VoucherAmountOrCurrencyMismatch) {
  Payment("p1");
  Outbox("p1", "SENT");
  Voucher("p1", 999);
  Payment("p2");
  Outbox("p2", "SENT");
  Voucher("p2", 100, "USD");
  ExpectOnly(Check(), "voucher_amount_mismatch", 2);
}

TEST_F(CheckerTest, VoucherMessageIdMismatch) {
  Payment("p1");
  Outbox("p1", "SENT");
  Voucher("p1", 100, "EUR", "other-message");
  ExpectOnly(Check(), "voucher_message_id_mismatch", 1);
}

TEST_F(CheckerTest, StaleSendingFailsUnlessDisabled) {
  Payment("p1");
  Outbox("p1", "SENDING", absl::Minutes(11));
  Payment("p2");
  Outbox("p2", "SENDING", absl::Minutes(9));
  ExpectOnly(Check(), "stale_sending", 1);
  EXPECT_EQ(Exit(), kExitViolation);

  config_.stale_after = absl::Minutes(5);
  EXPECT_EQ(CountOf(Check(), "stale_sending"), 2);

  config_.fail_on_stale = false;
  Report r = Check();
  EXPECT_EQ(CountOf(r, "stale_sending"), 2);  // still reported
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(Exit(), kExitOk);
  EXPECT_TRUE(absl::StrContains(out_.str(), "warn stale_sending")) << out_.str();
}

TEST_F(CheckerTest, ArchivedRowsCountAsSent) {
  Sent("p1");
  Sent("p2");
  Payment("p3");
  Outbox("p3", "SENT");  // archived below without a voucher
  pay_->exec("CREATE TABLE outbox_archive AS SELECT * FROM outbox WHERE 0");
  pay_->exec("INSERT INTO outbox_archive SELECT * FROM outbox WHERE biz_key IN ('p2', 'p3')");
  pay_->exec("DELETE FROM outbox WHERE biz_key IN ('p2', 'p3')");
  Report r = Check();
  EXPECT_EQ(r.counts.outbox_sent, 1);
  EXPECT_EQ(r.counts.outbox_archived, 2);
  ExpectOnly(r, "sent_without_voucher", 1);
  EXPECT_EQ(r.Find("sent_without_voucher")->examples, std::vector<std::string>{"p3"});

  pay_->exec("UPDATE outbox_archive SET message_id = 'x' WHERE biz_key = 'p2'");
  EXPECT_EQ(CountOf(Check(), "voucher_message_id_mismatch"), 1);
  pay_->exec("INSERT INTO outbox_archive SELECT * FROM outbox_archive WHERE biz_key = 'p2'");
  pay_->exec("UPDATE outbox_archive SET biz_key = 'gone' WHERE rowid = last_insert_rowid()");
  EXPECT_EQ(CountOf(Check(), "outbox_without_payment"), 1);
}

// Retention deleted archived rows acknowledged before its watermark: their
// payments, created before it and booked, are counted as pruned. A payment
// created after the watermark, or one never booked (only SENT rows are
// archived), has lost its row all the same.
TEST_F(CheckerTest, PaymentsWhoseArchivedRowRetentionDeletedArePrunedNotMissing) {
  pay_->exec(kRetentionSchema);
  const int64_t watermark = kNowMs - absl::ToInt64Milliseconds(absl::Hours(24 * 30));
  const int64_t day = absl::ToInt64Milliseconds(absl::Hours(24));
  Sent("p1");
  Payment("pruned-1", 100, "EUR", watermark - 5 * day);
  Voucher("pruned-1");
  Payment("pruned-2", 100, "EUR", watermark - 1);
  Voucher("pruned-2");
  Payment("never-booked", 100, "EUR", watermark - day);
  Payment("young", 100, "EUR", watermark + 1);
  Voucher("young");
  EXPECT_EQ(CountOf(Check(), "payment_without_outbox"), 4);  // no watermark: nothing pruned

  pay_->exec(absl::StrCat("INSERT INTO outbox_retention VALUES ('outbox_audit', ", kNowMs,
                          ", 9), ('outbox_archive', ", watermark, ", 2)"));
  Report r = Check();
  ExpectOnly(r, "payment_without_outbox", 2);
  EXPECT_EQ(r.Find("payment_without_outbox")->examples,
            (std::vector<std::string>{"never-booked", "young"}));
  EXPECT_EQ(r.counts.outbox_pruned, 2);
  EXPECT_EQ(r.archive_pruned_before, watermark);

  EXPECT_EQ(Exit(), kExitViolation);
  EXPECT_TRUE(absl::StrContains(out_.str(), "archived=0 pruned=2\n")) << out_.str();
  EXPECT_TRUE(absl::StrContains(
      out_.str(),
      "pruned:             archived rows acknowledged before 2023-10-15T22:13:20.000Z deleted by "
      "retention\n"))
      << out_.str();
  EXPECT_EQ(Exit(/*json=*/true), kExitViolation);
  EXPECT_TRUE(absl::StrContains(out_.str(), "\"outbox_pruned\": 2,")) << out_.str();
  EXPECT_TRUE(
      absl::StrContains(out_.str(), absl::StrCat("\"archive_pruned_before_ms\": ", watermark, ",")))
      << out_.str();

  pay_->exec("DELETE FROM payments WHERE payment_id = 'never-booked'");
  Outbox("young", "SENT");
  r = Check();
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.counts.outbox_pruned, 2);
}

TEST_F(CheckerTest, ExamplesAreCapped) {
  for (int i = 0; i < 25; ++i) Payment(absl::StrCat("p", i));
  Report r = Check();  // Find points into r: keep it alive
  const CheckResult* c = r.Find("payment_without_outbox");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->count, 25);
  EXPECT_EQ(c->examples.size(), 10u);
}

TEST_F(CheckerTest, ReadsWhileAWriterHoldsATransaction) {
  Sent("p1");
  pay_->exec("BEGIN IMMEDIATE");
  Payment("p2");  // uncommitted: invisible, so no violation
  EXPECT_TRUE(Check().ok());
  pay_->exec("ROLLBACK");
}

TEST_F(CheckerTest, JsonOutput) {
  Payment("p\"1");
  EXPECT_EQ(Exit(/*json=*/true), kExitViolation);
  const std::string json = out_.str();
  EXPECT_TRUE(absl::StartsWith(json, "{")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"ok\": false")) << json;
  EXPECT_TRUE(absl::StrContains(json, "\"payments\": 1")) << json;
  EXPECT_TRUE(absl::StrContains(
      json,
      "{\"name\": \"payment_without_outbox\", \"description\": \"payment with no outbox "
      "row\", \"count\": 1, \"examples\": [\"p\\\"1\"], \"violation\": true}"))
      << json;

  pay_->exec("DELETE FROM payments");
  EXPECT_EQ(Exit(true), kExitOk);
  EXPECT_TRUE(absl::StrContains(out_.str(), "\"ok\": true")) << out_.str();
}

TEST_F(CheckerTest, MissingFileIsAnErrorNotCreated) {
  config_.accounting_db = dir_ + "/nope.db";
  absl::StatusOr<Report> r = RunChecks(config_, kNow);
  EXPECT_TRUE(absl::IsNotFound(r.status())) << r.status();
  EXPECT_EQ(Exit(), kExitError);
  EXPECT_TRUE(absl::StrContains(err_.str(), "accounting db not found")) << err_.str();
  EXPECT_FALSE(std::filesystem::exists(config_.accounting_db));
}

TEST_F(CheckerTest, WrongFileIsAnError) {
  config_.accounting_db = config_.payment_db;  // no vouchers table
  EXPECT_TRUE(absl::IsFailedPrecondition(RunChecks(config_, kNow).status()));
  std::ofstream(dir_ + "/junk.db") << "not a database at all, just some text to fill a page";
  config_.accounting_db = dir_ + "/junk.db";
  EXPECT_EQ(Exit(), kExitError);
  EXPECT_FALSE(err_.str().empty());
}

// A file from a newer schema than the checks know is refused, with exit 2;
// older ones (these fixtures have user_version 0) and the known versions are
// checked.
TEST_F(CheckerTest, ANewerSchemaVersionIsRefused) {
  Sent("p1");
  pay_->exec(absl::StrCat("PRAGMA user_version = ", kPaymentDbSchemaVersion));
  acc_->exec(absl::StrCat("PRAGMA user_version = ", kAccountingDbSchemaVersion));
  EXPECT_TRUE(Check().ok());

  pay_->exec(absl::StrCat("PRAGMA user_version = ", kPaymentDbSchemaVersion + 3));
  absl::StatusOr<Report> r = RunChecks(config_, kNow);
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
  EXPECT_EQ(Exit(), kExitError);
  EXPECT_EQ(err_.str(),
            absl::StrCat("outbox_check: ", config_.payment_db, " has schema version ",
                         kPaymentDbSchemaVersion + 3, "; this outbox_check knows up to ",
                         kPaymentDbSchemaVersion, ": refusing to check a newer file\n"));

  pay_->exec(absl::StrCat("PRAGMA user_version = ", kPaymentDbSchemaVersion));
  acc_->exec(absl::StrCat("PRAGMA user_version = ", kAccountingDbSchemaVersion + 1));
  r = RunChecks(config_, kNow);
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), config_.accounting_db)) << r.status();
}

TEST_F(CheckerTest, PathWithUriCharacters) {
  Sent("p1");
  const std::string odd = dir_ + "/odd?mode=rwc#x%20.db";
  pay_.reset();  // the last close checkpoints, so the file stands alone
  std::filesystem::rename(config_.payment_db, odd);
  config_.payment_db = odd;
  EXPECT_TRUE(Check().ok());
}

// Accounting shards: --accounting_db lists every shard's file, and the checks
// see the union of their vouchers.
class ShardedCheckerTest : public CheckerTest {
 protected:
  void SetUp() override {
    CheckerTest::SetUp();
    const std::string second = dir_ + "/accounting-1.db";
    shards_[0] = std::move(acc_);
    shards_[1] =
        std::make_unique<SQLite::Database>(second, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    shards_[1]->exec("PRAGMA journal_mode=WAL");
    shards_[1]->exec(kAccountingSchema);
    config_.accounting_db = absl::StrCat(config_.accounting_db, ",", second);
  }
  void TearDown() override {
    for (auto& shard : shards_) shard.reset();
    CheckerTest::TearDown();
  }
  // Books `payment_id` on accounting shard `k` (0 or 1).
  void VoucherOn(int k, const std::string& payment_id) {
    acc_ = std::move(shards_[k]);
    Voucher(payment_id);
    shards_[k] = std::move(acc_);
  }
  void SentOn(int k, const std::string& id) {
    Payment(id);
    Outbox(id, "SENT");
    VoucherOn(k, id);
  }
  std::unique_ptr<SQLite::Database> shards_[2];
};

TEST_F(ShardedCheckerTest, PaymentsSpreadOverShardsAreConsistent) {
  SentOn(0, "p1");
  SentOn(1, "p2");
  SentOn(1, "p3");
  Payment("p4");
  Outbox("p4", "SENDING");
  VoucherOn(0, "p4");  // accounted on shard 0, ack on its way
  const Report r = Check();
  EXPECT_TRUE(r.ok());
  for (const CheckResult& c : r.checks) EXPECT_EQ(c.count, 0) << c.name;
  EXPECT_EQ(r.counts.vouchers, 4);
  EXPECT_EQ(r.counts.processed_messages, 4);
  EXPECT_EQ(r.sending_with_voucher, 1);
  EXPECT_EQ(Exit(), kExitOk) << out_.str() << err_.str();
}

TEST_F(ShardedCheckerTest, OnlyTheFirstShardIsNotEnough) {
  SentOn(0, "p1");
  SentOn(1, "p2");
  config_.accounting_db = dir_ + "/accounting.db";
  ExpectOnly(Check(), "sent_without_voucher", 1);
}

TEST_F(ShardedCheckerTest, PaymentBookedOnTwoShardsIsADuplicate) {
  SentOn(0, "p1");
  VoucherOn(1, "p1");  // a copy hashed to the other shard after a bad reshard
  SentOn(1, "p2");
  ExpectOnly(Check(), "payment_multiple_vouchers", 1);
  EXPECT_EQ(Exit(), kExitViolation);
}

TEST_F(ShardedCheckerTest, AMissingShardIsAnError) {
  config_.accounting_db = absl::StrCat(config_.accounting_db, ",", dir_, "/accounting-2.db");
  EXPECT_TRUE(absl::IsNotFound(RunChecks(config_, kNow).status()));
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/accounting-2.db"));
}

}  // namespace
}  // namespace outbox::checker
