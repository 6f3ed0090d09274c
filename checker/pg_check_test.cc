// outbox_check on PostgreSQL: payment's and accounting's databases made by
// the services' own PostgreSQL schemas (pg_schema.cc, PaymentPgSchema,
// AccountingPgSchema), each check's violation planted as the SQLite tests
// plant it (consistency_check_test.cc, repair_test.cc), the repair writing
// payment's database, and the outbox_check binary run on the URIs. One
// server of scripts/postgres_node.sh; each test gets a schema of its own for
// each database.
#include <sys/wait.h>

#include <SQLiteCpp/SQLiteCpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "accounting_service/pg_voucher_store.h"
#include "checker/consistency_check.h"
#include "checker/repair.h"
#include "checker/report.h"
#include "payment_service/payment_pg_store.h"
#include "shared/postgres/pg_connection.h"
#include "shared/postgres/pg_schema.h"
#include "shared/postgres/pg_session.h"
#include "shared/testing/pg_servers.h"
#include "shared/testing/temp_dir.h"

namespace outbox::checker {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

testing::PgServersEnvironment* const kServer = testing::AddPgServers("pg_check_test");

const absl::Time kNow = absl::FromUnixMillis(1'700'000'000'000);
const int64_t kNowMs = absl::ToUnixMillis(kNow);

class PgCheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    config_.payment_db = kServer->FreshSchema();
    config_.accounting_db = kServer->FreshSchema();
    acc_conninfo_ = config_.accounting_db;
    pay_ = Connect(config_.payment_db, {&PgOutboxSchema(), &payment::PaymentPgSchema()});
    acc_ = Connect(config_.accounting_db, {&accounting::AccountingPgSchema()});
    ASSERT_NE(pay_, nullptr);
    ASSERT_NE(acc_, nullptr);
  }

  static std::unique_ptr<PgConnection> Connect(const std::string& conninfo,
                                               const std::vector<const PgSchema*>& schemas) {
    auto session = PgSession::Open(conninfo);
    EXPECT_TRUE(session.ok()) << session.status();
    if (!session.ok()) return nullptr;
    for (const PgSchema* schema : schemas) {
      const absl::Status s = UpgradePgSchema(**session, *schema);
      EXPECT_TRUE(s.ok()) << s;
    }
    auto conn = PgConnection::Open(conninfo);
    EXPECT_TRUE(conn.ok()) << conn.status();
    return conn.ok() ? *std::move(conn) : nullptr;
  }

  static void Exec(PgConnection& conn, const std::string& sql) {
    const absl::Status s = conn.Exec(sql);
    ASSERT_TRUE(s.ok()) << s << "\n" << sql;
  }
  // The rows of `sql`, columns joined by '|', rows by ','.
  static std::string Query(PgConnection& conn, const std::string& sql) {
    absl::StatusOr<PgResult> r = conn.Query(sql);
    EXPECT_TRUE(r.ok()) << r.status() << "\n" << sql;
    if (!r.ok()) return "";
    std::vector<std::string> rows;
    for (int i = 0; i < r->rows(); ++i) {
      std::vector<std::string> cells;
      for (int c = 0; c < r->columns(); ++c) cells.emplace_back(r->Get(i, c));
      rows.push_back(absl::StrJoin(cells, "|"));
    }
    return absl::StrJoin(rows, ",");
  }

  void Payment(const std::string& id, int64_t amount = 100, const std::string& currency = "EUR",
               int64_t created_at = kNowMs) {
    Exec(*pay_, absl::StrCat("INSERT INTO payments (payment_id, idempotency_key, payer_account, "
                             "payee_account, amount_minor, currency, description, created_at) "
                             "VALUES ('",
                             id, "', 'k-", id, "', 'a', 'b', ", amount, ", '", currency, "', '', ",
                             created_at, ")"));
  }
  void Outbox(const std::string& payment_id, const std::string& status,
              absl::Duration age = absl::Seconds(5)) {
    Exec(*pay_,
         absl::StrCat("INSERT INTO outbox (message_id, biz_type, biz_key, topic, payload, status, "
                      "attempts, max_attempts, next_retry_at, created_at, updated_at, sent_at, "
                      "last_error) VALUES ('m-",
                      payment_id, "', 'payment', '", payment_id, "', 'PAY_QUEUE', '\\x00', '",
                      status, "', 3, 3, 0, ", absl::ToUnixMillis(kNow - age), ", 0, 0, '",
                      status == "FAILED" ? "no acknowledgement after 3 attempts" : "", "')"));
  }
  void Voucher(const std::string& payment_id, int64_t amount = 100,
               const std::string& currency = "EUR", std::string message_id = "") {
    if (message_id.empty()) message_id = "m-" + payment_id;
    Exec(*acc_, absl::StrCat("INSERT INTO vouchers (voucher_id, payment_id, message_id, "
                             "debit_account, credit_account, amount_minor, currency, created_at) "
                             "VALUES ('v-",
                             payment_id, "-", ++vouchers_, "', '", payment_id, "', '", message_id,
                             "', 'a', 'b', ", amount, ", '", currency, "', 0)"));
    Exec(*acc_, absl::StrCat("INSERT INTO processed_messages VALUES ('", message_id, "', '",
                             payment_id, "', 'v', 0) ON CONFLICT DO NOTHING"));
  }
  void Sent(const std::string& id) {
    Payment(id);
    Outbox(id, "SENT");
    Voucher(id);
  }
  // Retention's move of a SENT row to the archive.
  void Archive(const std::string& id) {
    Exec(*pay_, absl::StrCat("INSERT INTO outbox_archive SELECT * FROM outbox WHERE biz_key = '",
                             id, "'; DELETE FROM outbox WHERE biz_key = '", id, "'"));
  }
  // accounting lost the voucher and its processed id (e.g. restored from an older backup).
  void LoseBooking(const std::string& id) {
    Exec(*acc_, absl::StrCat("DELETE FROM vouchers WHERE payment_id = '", id,
                             "'; DELETE FROM processed_messages WHERE message_id = 'm-", id, "'"));
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
  static void ExpectOnly(const Report& r, const std::string& name, int64_t count) {
    EXPECT_EQ(r.checks.size(), 9u);
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
  int Repair(bool apply) {
    out_.str("");
    err_.str("");
    RepairOptions options;
    options.apply = apply;
    options.actor = "alice";
    return RunRepairAndPrint(config_, options, kNow, /*json=*/false, out_, err_);
  }

  CheckConfig config_;
  std::string acc_conninfo_;
  std::unique_ptr<PgConnection> pay_;
  std::unique_ptr<PgConnection> acc_;
  int vouchers_ = 0;
  std::ostringstream out_;
  std::ostringstream err_;
};

TEST_F(PgCheckTest, ConsistentDatabasesAreOk) {
  Sent("p1");
  Sent("p2");
  Payment("p3");
  Outbox("p3", "SENDING");  // in flight
  Payment("p4");
  Outbox("p4", "SENDING");
  Voucher("p4");  // accounted, ack pending
  Payment("p5");
  Outbox("p5", "FAILED");
  Sent("p6");
  Archive("p6");
  const Report r = Check();
  EXPECT_EQ(r.counts.payments, 6);
  EXPECT_EQ(r.counts.outbox_sending, 2);
  EXPECT_EQ(r.counts.outbox_sent, 2);
  EXPECT_EQ(r.counts.outbox_failed, 1);
  EXPECT_EQ(r.counts.outbox_archived, 1);
  EXPECT_EQ(r.counts.vouchers, 4);
  EXPECT_EQ(r.counts.processed_messages, 4);
  EXPECT_EQ(r.sending_with_voucher, 1);
  EXPECT_EQ(r.checks.size(), 9u);
  for (const CheckResult& c : r.checks) EXPECT_EQ(c.count, 0) << c.name;
  EXPECT_EQ(Exit(), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("result: OK"));
  EXPECT_EQ(r.payment_db, RedactConninfo(config_.payment_db));
}

TEST_F(PgCheckTest, PaymentWithoutOutbox) {
  Sent("p1");
  Payment("p2");
  const Report r = Check();
  ExpectOnly(r, "payment_without_outbox", 1);
  EXPECT_EQ(r.Find("payment_without_outbox")->examples, std::vector<std::string>{"p2"});
  EXPECT_EQ(Exit(), kExitViolation);
}

TEST_F(PgCheckTest, OutboxWithoutPayment) {
  Outbox("p1", "SENDING");
  ExpectOnly(Check(), "outbox_without_payment", 1);
}

TEST_F(PgCheckTest, SentWithoutVoucher) {
  Payment("p1");
  Outbox("p1", "SENT");
  ExpectOnly(Check(), "sent_without_voucher", 1);
}

TEST_F(PgCheckTest, ArchivedWithoutVoucher) {
  Sent("p1");
  Archive("p1");
  LoseBooking("p1");
  const Report r = Check();
  ExpectOnly(r, "sent_without_voucher", 1);
  EXPECT_EQ(r.Find("sent_without_voucher")->examples, std::vector<std::string>{"p1"});
}

TEST_F(PgCheckTest, FailedWithVoucher) {
  Sent("p1");
  Payment("p2");
  Outbox("p2", "FAILED");
  Voucher("p2");
  ExpectOnly(Check(), "failed_with_voucher", 1);
}

TEST_F(PgCheckTest, VoucherWithoutPayment) {
  Voucher("ghost");
  ExpectOnly(Check(), "voucher_without_payment", 1);
  config_.payment_id_prefix = "s0-";  // another shard's voucher
  EXPECT_TRUE(Check().ok());
}

TEST_F(PgCheckTest, PaymentWithTwoVouchers) {
  // The real schema forbids it: drop the UNIQUE to simulate a regression.
  Exec(*acc_, "ALTER TABLE vouchers DROP CONSTRAINT vouchers_payment_id_key");
  Sent("p1");
  Voucher("p1");
  ExpectOnly(Check(), "payment_multiple_vouchers", 1);
}

TEST_F(PgCheckTest, VoucherAmountOrCurrencyMismatch) {
  Payment("p1");
  Outbox("p1", "SENT");
  Voucher("p1", 999);
  Payment("p2");
  Outbox("p2", "SENT");
  Voucher("p2", 100, "USD");
  ExpectOnly(Check(), "voucher_amount_mismatch", 2);
}

TEST_F(PgCheckTest, VoucherMessageIdMismatch) {
  Payment("p1");
  Outbox("p1", "SENT");
  Voucher("p1", 100, "EUR", "other-message");
  ExpectOnly(Check(), "voucher_message_id_mismatch", 1);
}

TEST_F(PgCheckTest, StaleSending) {
  Payment("p1");
  Outbox("p1", "SENDING", absl::Minutes(11));
  Payment("p2");
  Outbox("p2", "SENDING", absl::Minutes(9));
  ExpectOnly(Check(), "stale_sending", 1);
  config_.fail_on_stale = false;
  EXPECT_TRUE(Check().ok());
}

TEST_F(PgCheckTest, PrunedPaymentsAreNotMissing) {
  const int64_t watermark = kNowMs - absl::ToInt64Milliseconds(absl::Hours(24 * 30));
  Sent("p1");
  Payment("pruned", 100, "EUR", watermark - 1);
  Voucher("pruned");
  Payment("young", 100, "EUR", watermark + 1);
  Voucher("young");
  EXPECT_EQ(CountOf(Check(), "payment_without_outbox"), 2);
  Exec(*pay_,
       absl::StrCat("INSERT INTO outbox_retention VALUES ('outbox_archive', ", watermark, ", 1)"));
  const Report r = Check();
  ExpectOnly(r, "payment_without_outbox", 1);
  EXPECT_EQ(r.counts.outbox_pruned, 1);
}

// Accounting shards: every shard's database, comma-separated; a SQLite
// file and a PostgreSQL database may be mixed.
TEST_F(PgCheckTest, AccountingShardsAreOneSetOfVouchers) {
  const std::string shard2 = kServer->FreshSchema();
  std::unique_ptr<PgConnection> acc2 = Connect(shard2, {&accounting::AccountingPgSchema()});
  ASSERT_NE(acc2, nullptr);
  Sent("p1");
  Payment("p2");
  Outbox("p2", "SENT");
  ExpectOnly(Check(), "sent_without_voucher", 1);
  Exec(*acc2,
       "INSERT INTO vouchers (voucher_id, payment_id, message_id, debit_account, "
       "credit_account, amount_minor, currency, created_at) VALUES "
       "('v2', 'p2', 'm-p2', 'a', 'b', 100, 'EUR', 0)");
  config_.accounting_db = absl::StrCat(config_.accounting_db, ",", shard2);
  EXPECT_TRUE(Check().ok());
  Exec(*acc2,
       "INSERT INTO vouchers (voucher_id, payment_id, message_id, debit_account, "
       "credit_account, amount_minor, currency, created_at) VALUES "
       "('v3', 'p1', 'm-p1', 'a', 'b', 100, 'EUR', 0)");
  ExpectOnly(Check(), "payment_multiple_vouchers", 1);
}

// A SQLite file beside a PostgreSQL database: the file is copied in its
// place in the order of the snapshots, and checked with the same checks.
TEST_F(PgCheckTest, ASqliteFileAndAPostgresqlDatabaseMix) {
  const TempDir dir;
  const std::string accounting_file = dir.path() + "/accounting.db";
  {
    SQLite::Database acc(accounting_file, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    acc.exec(R"sql(
      CREATE TABLE vouchers (id INTEGER PRIMARY KEY, voucher_id TEXT NOT NULL UNIQUE, payment_id TEXT NOT NULL UNIQUE, message_id TEXT NOT NULL, debit_account TEXT NOT NULL, credit_account TEXT NOT NULL, amount_minor INTEGER NOT NULL CHECK (amount_minor > 0), currency TEXT NOT NULL, created_at INTEGER NOT NULL);
      CREATE TABLE processed_messages (message_id TEXT PRIMARY KEY, payment_id TEXT NOT NULL, voucher_id TEXT NOT NULL, processed_at INTEGER NOT NULL) WITHOUT ROWID;
      INSERT INTO vouchers VALUES (1, 'v1', 'p1', 'm-p1', 'a', 'b', 100, 'EUR', 0);
      INSERT INTO processed_messages VALUES ('m-p1', 'p1', 'v1', 0);)sql");
  }
  Payment("p1");
  Outbox("p1", "SENT");
  Payment("p2");
  Outbox("p2", "SENT");
  config_.accounting_db = accounting_file;
  const Report r = Check();
  ExpectOnly(r, "sent_without_voucher", 1);
  EXPECT_EQ(r.Find("sent_without_voucher")->examples, std::vector<std::string>{"p2"});
  EXPECT_EQ(r.accounting_db, accounting_file);
  // p2's voucher on a PostgreSQL shard of accounting, beside the file.
  Voucher("p2");
  config_.accounting_db = absl::StrCat(accounting_file, ",", acc_conninfo_);
  EXPECT_TRUE(Check().ok());
  EXPECT_EQ(Repair(/*apply=*/true), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("nothing to repair"));
}

TEST_F(PgCheckTest, ADatabaseWithoutTheTablesIsRefused) {
  config_.accounting_db = config_.payment_db;
  EXPECT_EQ(RunChecks(config_, kNow).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Exit(), kExitError);
}

TEST_F(PgCheckTest, ANewerSchemaVersionIsRefused) {
  Sent("p1");
  EXPECT_TRUE(Check().ok());
  Exec(*acc_, absl::StrCat("UPDATE schema_version SET version = ", kPgAccountingSchemaVersion + 1,
                           " WHERE name = 'accounting'"));
  absl::StatusOr<Report> report = RunChecks(config_, kNow);
  EXPECT_EQ(report.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(report.status().message(), HasSubstr("refusing to check a newer database"));
  Exec(*acc_, "UPDATE schema_version SET version = 1 WHERE name = 'accounting'");
  Exec(*pay_, absl::StrCat("UPDATE schema_version SET version = ", kPgOutboxSchemaVersion + 1,
                           " WHERE name = 'outbox'"));
  EXPECT_EQ(RunChecks(config_, kNow).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Exit(), kExitError);
}

TEST_F(PgCheckTest, APasswordIsNeverPrinted) {
  config_.payment_db = "postgresql://alice:s3cret-pw@127.0.0.1:1/payment?connect_timeout=2";
  EXPECT_EQ(Exit(), kExitError);
  EXPECT_THAT(err_.str(), Not(HasSubstr("s3cret-pw")));
  EXPECT_THAT(out_.str(), Not(HasSubstr("s3cret-pw")));
  EXPECT_EQ(Repair(/*apply=*/true), kExitError);
  EXPECT_THAT(err_.str(), Not(HasSubstr("s3cret-pw")));
}

TEST_F(PgCheckTest, ADryRunChangesNoRowAndWritesItsAuditRecord) {
  Sent("p1");
  LoseBooking("p1");
  EXPECT_EQ(Repair(/*apply=*/false), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("would repair  sent_without_voucher"));
  EXPECT_EQ(Query(*pay_, "SELECT status FROM outbox"), "SENT");
  EXPECT_EQ(Query(*pay_,
                  "SELECT actor, action, target, dry_run, rows, outcome, at "
                  "FROM outbox_audit"),
            absl::StrCat("alice|repair|sent_without_voucher|1|1|ok|", kNowMs));
  EXPECT_EQ(Query(*pay_, "SELECT count(*) FROM outbox_history"), "0");
}

TEST_F(PgCheckTest, ASentRowWithoutAVoucherGoesBackToSendingDueNow) {
  Sent("p1");
  Sent("p2");
  LoseBooking("p1");
  EXPECT_EQ(Repair(/*apply=*/true), kExitOk) << out_.str() << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("repaired      sent_without_voucher"));
  EXPECT_EQ(Query(*pay_,
                  "SELECT status, attempts, next_retry_at, sent_at, last_error, "
                  "restarted_at FROM outbox WHERE biz_key = 'p1'"),
            absl::StrCat("SENDING|0|", kNowMs, "|0|repaired: SENT without a voucher|", kNowMs));
  EXPECT_EQ(Query(*pay_, "SELECT status FROM outbox WHERE biz_key = 'p2'"), "SENT");
  EXPECT_EQ(Query(*pay_, "SELECT message_id, event, instance, at, detail FROM outbox_history"),
            absl::StrCat("m-p1|repaired|alice|", kNowMs, "|repaired: SENT without a voucher"));
  EXPECT_EQ(Query(*pay_, "SELECT actor, target, dry_run, rows, outcome FROM outbox_audit"),
            "alice|sent_without_voucher|0|1|ok");
  EXPECT_TRUE(Check().ok());
  // Nothing left: a second run changes nothing and writes no record.
  EXPECT_EQ(Repair(/*apply=*/true), kExitOk);
  EXPECT_EQ(Query(*pay_, "SELECT count(*) FROM outbox_audit"), "1");
}

TEST_F(PgCheckTest, AFailedRowWithAVoucherIsClosedSent) {
  Payment("p1");
  Outbox("p1", "FAILED");
  Voucher("p1");
  EXPECT_EQ(Repair(/*apply=*/true), kExitOk) << out_.str() << err_.str();
  EXPECT_EQ(Query(*pay_, "SELECT status, sent_at FROM outbox"), absl::StrCat("SENT|", kNowMs));
  EXPECT_EQ(Query(*pay_, "SELECT detail FROM outbox_history"),
            "repaired: FAILED with a voucher, closed SENT");
  EXPECT_EQ(Query(*pay_, "SELECT target, rows FROM outbox_audit"), "failed_with_voucher|1");
  EXPECT_TRUE(Check().ok());
}

TEST_F(PgCheckTest, AnArchivedRowWithoutAVoucherMovesBackToOutboxAsSending) {
  Sent("p1");
  Sent("p2");
  Archive("p1");
  Archive("p2");
  LoseBooking("p1");
  EXPECT_EQ(Repair(/*apply=*/true), kExitOk) << out_.str() << err_.str();
  EXPECT_EQ(Query(*pay_,
                  "SELECT message_id, status, attempts, next_retry_at, last_error, biz_key, "
                  "topic, encode(payload, 'hex') FROM outbox"),
            absl::StrCat("m-p1|SENDING|0|", kNowMs,
                         "|repaired: archived SENT without a voucher|p1|PAY_QUEUE|00"));
  EXPECT_EQ(Query(*pay_, "SELECT message_id FROM outbox_archive"), "m-p2");
  EXPECT_EQ(Query(*pay_, "SELECT target FROM outbox_audit"), "archived_without_voucher");
  EXPECT_EQ(Query(*pay_, "SELECT count(*) FROM outbox_history WHERE message_id = 'm-p1'"), "1");
  EXPECT_TRUE(Check().ok());
}

TEST_F(PgCheckTest, WhatCannotBeRepairedIsLeftToAnOperator) {
  Sent("p1");
  Payment("p2");  // no outbox row
  Voucher("ghost");
  EXPECT_EQ(Repair(/*apply=*/true), kExitViolation);
  EXPECT_THAT(out_.str(), HasSubstr("payment_without_outbox p2"));
  EXPECT_THAT(out_.str(), HasSubstr("voucher_without_payment ghost"));
  EXPECT_EQ(Query(*pay_, "SELECT count(*) FROM outbox_audit"), "0");
}

// The binary itself on the URIs: its exit statuses, its report.
#ifdef OUTBOX_CHECK_BINARY
int RunBinary(const std::string& args, std::string* out) {
  FILE* pipe = popen(absl::StrCat(OUTBOX_CHECK_BINARY, " ", args, " 2>&1").c_str(), "r");
  if (pipe == nullptr) return -1;
  char buf[512];
  out->clear();
  while (fgets(buf, sizeof buf, pipe) != nullptr) *out += buf;
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(PgCheckTest, TheBinaryOnUris) {
  Sent("p1");
  const std::string dbs = absl::StrCat("--payment_db='", config_.payment_db, "' --accounting_db='",
                                       config_.accounting_db, "'");
  std::string out;
  EXPECT_EQ(RunBinary(dbs, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("result: OK"));
  LoseBooking("p1");
  EXPECT_EQ(RunBinary(dbs + " --json", &out), 1) << out;
  EXPECT_THAT(out, HasSubstr("\"sent_without_voucher\""));
  EXPECT_EQ(RunBinary(dbs + " --repair --apply --actor=bob", &out), 0) << out;
  EXPECT_EQ(Query(*pay_, "SELECT status FROM outbox"), "SENDING");
  EXPECT_EQ(Query(*pay_, "SELECT actor, target FROM outbox_audit"), "bob|sent_without_voucher");
  // The row is on its way again (its created_at is the test's clock, long
  // before the binary's: stale, which is not the point here).
  EXPECT_EQ(RunBinary(dbs + " --fail_on_stale=false", &out), 0) << out;
}
#endif

}  // namespace
}  // namespace outbox::checker
