#include "checker/repair.h"

#include <SQLiteCpp/SQLiteCpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "accounting_service/accounting_db_schema.h"
#include "checker/report.h"
#include "service_kit/payment_db_schema.h"
#include "shared/sqlite/internal/audit.h"
#include "shared/sqlite/internal/history.h"
#include "shared/sqlite/schema.h"
#include "shared/testing/status_matchers.h"
#include "shared/testing/temp_dir.h"

namespace outbox::checker {
namespace {

using ::outbox::testing::StatusIs;
using ::testing::HasSubstr;

const absl::Time kNow = absl::FromUnixMillis(1'700'000'000'000);
const int64_t kNowMs = absl::ToUnixMillis(kNow);
const int64_t kMinuteAgo = kNowMs - 60'000;

// payment.db and accounting.db made by the services' own schemas, filled by
// hand the way the services fill them, then damaged the way a fault would.
class RepairTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pay_path_ = dir_.path() + "/payment.db";
    acc_path_ = dir_.path() + "/accounting.db";
    pay_ = Create(pay_path_, PaymentDbSchema());
    acc_ = Create(acc_path_, accounting::AccountingDbSchema());
    config_.payment_db = pay_path_;
    config_.accounting_db = acc_path_;
    options_.apply = true;
    options_.actor = "alice";
  }

  static std::unique_ptr<SQLite::Database> Create(const std::string& path, const DbSchema& schema,
                                                  int version = -1) {
    auto db =
        std::make_unique<SQLite::Database>(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db->exec("PRAGMA journal_mode=WAL");
    EXPECT_OK(UpgradeSchema(*db, path, schema, version));
    return db;
  }

  void Payment(const std::string& id, int64_t amount = 100) {
    SQLite::Statement s(*pay_,
                        "INSERT INTO payments (payment_id, idempotency_key, payer_account, "
                        "payee_account, amount_minor, currency, description, created_at) "
                        "VALUES (?, ?, 'A', 'B', ?, 'EUR', '', ?)");
    s.bind(1, id);
    s.bind(2, "key-" + id);
    s.bind(3, amount);
    s.bind(4, kMinuteAgo);
    s.exec();
  }
  // An outbox row for payment `id` (message "m-<id>") in `status`.
  void Row(const std::string& id, const std::string& status) {
    SQLite::Statement s(*pay_, R"sql(
      INSERT INTO outbox (message_id, biz_type, biz_key, topic, payload, status, attempts,
                          max_attempts, next_retry_at, last_attempt_at, last_error, created_at,
                          updated_at, sent_at, failure_kind, failure_group)
      VALUES (?1, 'payment', ?2, 'PAY_QUEUE', x'00', ?3, 3, 3, ?4, ?4, ?5, ?4, ?4, ?6, ?7, ?8))sql");
    const bool failed = status == "FAILED";
    s.bind(1, "m-" + id);
    s.bind(2, id);
    s.bind(3, status);
    s.bind(4, kMinuteAgo);
    s.bind(5, failed ? "no acknowledgement after 3 attempts" : "");
    s.bind(6, status == "SENT" ? kMinuteAgo : 0);
    s.bind(7, failed ? "exhausted" : "");
    s.bind(8, failed ? "PAY_QUEUE/exhausted" : "");
    s.exec();
  }
  // What recovery's retention does to a SENT row.
  void Archive(const std::string& id) {
    pay_->exec(absl::StrCat("INSERT INTO outbox_archive SELECT * FROM outbox WHERE biz_key = '", id,
                            "'; DELETE FROM outbox WHERE biz_key = '", id, "'"));
  }
  // A voucher booked from message "m-<id>", and the processed id with it.
  void Voucher(SQLite::Database& acc, const std::string& id, int64_t amount = 100) {
    SQLite::Statement v(acc, R"sql(
      INSERT INTO vouchers (voucher_id, payment_id, message_id, debit_account, credit_account,
                            amount_minor, currency, created_at)
      VALUES (?1, ?2, ?3, 'A', 'B', ?4, 'EUR', ?5))sql");
    v.bind(1, "v-" + id);
    v.bind(2, id);
    v.bind(3, "m-" + id);
    v.bind(4, amount);
    v.bind(5, kMinuteAgo);
    v.exec();
    SQLite::Statement p(acc,
                        "INSERT INTO processed_messages (message_id, payment_id, voucher_id, "
                        "processed_at) VALUES (?, ?, ?, ?)");
    p.bind(1, "m-" + id);
    p.bind(2, id);
    p.bind(3, "v-" + id);
    p.bind(4, kMinuteAgo);
    p.exec();
  }
  void Voucher(const std::string& id, int64_t amount = 100) { Voucher(*acc_, id, amount); }
  // A payment as the services leave it: SENT with its voucher.
  void Booked(const std::string& id) {
    Payment(id);
    Row(id, "SENT");
    Voucher(id);
  }
  // Accounting lost the voucher and its processed id (an older accounting.db).
  void LoseBooking(const std::string& id) {
    acc_->exec(absl::StrCat("DELETE FROM vouchers WHERE payment_id = '", id,
                            "'; DELETE FROM processed_messages WHERE payment_id = '", id, "'"));
  }

  absl::StatusOr<RepairResult> RunRepair() {
    absl::StatusOr<Report> report = RunChecks(config_, kNow);
    if (!report.ok()) return report.status();
    absl::StatusOr<RepairCandidates> candidates = FindRepairCandidates(config_);
    if (!candidates.ok()) return candidates.status();
    return Repair(config_, *report, *candidates, options_, kNow);
  }
  int RunAndPrint(std::string* out = nullptr) {
    std::ostringstream o, e;
    const int code = RunRepairAndPrint(config_, options_, kNow, /*json=*/false, o, e);
    if (out != nullptr) *out = o.str() + e.str();
    return code;
  }

  std::string Query(const std::string& sql) {
    SQLite::Statement s(*pay_, sql);
    std::vector<std::string> rows;
    while (s.executeStep()) {
      std::vector<std::string> cols;
      for (int i = 0; i < s.getColumnCount(); ++i) cols.push_back(s.getColumn(i).getString());
      rows.push_back(absl::StrJoin(cols, "|"));
    }
    return absl::StrJoin(rows, "\n");
  }
  // Every row of the outbox and the archive, every column but the payload.
  std::string Rows() {
    return Query(
        "SELECT message_id, status, attempts, next_retry_at, last_error, sent_at, failure_kind, "
        "'live' FROM outbox UNION ALL SELECT message_id, status, attempts, next_retry_at, "
        "last_error, sent_at, failure_kind, 'archived' FROM outbox_archive ORDER BY 1");
  }
  std::string Status(const std::string& id) {
    return Query(absl::StrCat("SELECT status FROM outbox WHERE biz_key = '", id, "'"));
  }
  std::vector<AuditRecord> Audit() { return ListAudit(*pay_, 0, 100); }

  TempDir dir_{"outbox_repair_test"};
  std::string pay_path_, acc_path_;
  std::unique_ptr<SQLite::Database> pay_, acc_;
  CheckConfig config_;
  RepairOptions options_;
};

TEST_F(RepairTest, ConsistentFilesNeedNothingAndGetNoAuditRecord) {
  Booked("p1");
  std::string out;
  EXPECT_EQ(RunAndPrint(&out), kExitOk);
  EXPECT_THAT(out, HasSubstr("nothing to repair"));
  EXPECT_THAT(out, HasSubstr("repair result: OK, nothing to repair"));
  EXPECT_TRUE(Audit().empty());
}

TEST_F(RepairTest, ADryRunChangesNoRowAndWritesItsAuditRecord) {
  Booked("p1");
  Booked("p2");
  LoseBooking("p1");
  Payment("p3");
  Row("p3", "FAILED");
  Voucher("p3");
  const std::string before = Rows();
  options_.apply = false;
  std::string out;
  EXPECT_EQ(RunAndPrint(&out), kExitOk) << out;  // --apply would repair everything
  EXPECT_THAT(out, HasSubstr("dry run, nothing changed"));
  EXPECT_THAT(out, HasSubstr("would repair  sent_without_voucher"));
  EXPECT_THAT(out, HasSubstr("OK, --apply would repair every violation"));
  EXPECT_EQ(Rows(), before);
  EXPECT_EQ(CountHistory(*pay_), 0);
  std::vector<AuditRecord> audit = Audit();
  ASSERT_EQ(audit.size(), 2u);
  for (const AuditRecord& r : audit) {
    EXPECT_TRUE(r.dry_run);
    EXPECT_EQ(r.action, "repair");
    EXPECT_EQ(r.actor, "alice");
    EXPECT_EQ(r.rows, 1);
    EXPECT_EQ(r.outcome, "ok");
  }
  EXPECT_EQ(audit[1].target, kRepairSentWithoutVoucher);
  EXPECT_EQ(audit[0].target, kRepairFailedWithVoucher);
}

TEST_F(RepairTest, ASentRowWithoutAVoucherGoesBackToSendingDueNowWithAFreshBudget) {
  Booked("p1");
  Booked("p2");
  LoseBooking("p1");
  pay_->exec(
      "UPDATE outbox SET failure_kind = 'exhausted', acknowledged_by = 'bob' "
      "WHERE biz_key = 'p1'");  // left from an earlier failure
  std::string out;
  EXPECT_EQ(RunAndPrint(&out), kExitOk) << out;
  EXPECT_THAT(out, HasSubstr("repaired      sent_without_voucher"));
  EXPECT_EQ(Query("SELECT status, attempts, next_retry_at, sent_at, last_error, failure_kind, "
                  "failure_group, acknowledged_by, restarted_at FROM outbox WHERE biz_key = 'p1'"),
            absl::StrCat("SENDING|0|", kNowMs, "|0|repaired: SENT without a voucher||||", kNowMs));
  EXPECT_EQ(Status("p2"), "SENT");
  std::vector<HistoryEvent> history = ReadHistory(*pay_, "m-p1");
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].event, kEventRepaired);
  EXPECT_EQ(history[0].instance, "alice");
  EXPECT_EQ(history[0].at, kNowMs);
  EXPECT_EQ(history[0].detail, "repaired: SENT without a voucher");
  std::vector<AuditRecord> audit = Audit();
  ASSERT_EQ(audit.size(), 1u);
  EXPECT_EQ(audit[0].target, kRepairSentWithoutVoucher);
  EXPECT_FALSE(audit[0].dry_run);
  EXPECT_EQ(audit[0].rows, 1);
  EXPECT_EQ(audit[0].outcome, "ok");
  EXPECT_EQ(audit[0].at, kNowMs);
  // The checks see a row on its way, not a violation.
  absl::StatusOr<Report> after = RunChecks(config_, kNow);
  ASSERT_OK(after);
  EXPECT_TRUE(after->ok());
}

TEST_F(RepairTest, AFailedRowWithAVoucherIsClosedSentAsALateAcknowledgementWould) {
  Payment("p1");
  Row("p1", "FAILED");
  Voucher("p1");
  EXPECT_EQ(RunAndPrint(), kExitOk);
  EXPECT_EQ(Query("SELECT status, sent_at, last_error, failure_kind, failure_group FROM outbox"),
            absl::StrCat("SENT|", kNowMs, "|no acknowledgement after 3 attempts||"));
  std::vector<HistoryEvent> history = ReadHistory(*pay_, "m-p1");
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].detail, "repaired: FAILED with a voucher, closed SENT");
  ASSERT_EQ(Audit().size(), 1u);
  EXPECT_EQ(Audit()[0].target, kRepairFailedWithVoucher);
  absl::StatusOr<Report> after = RunChecks(config_, kNow);
  ASSERT_OK(after);
  EXPECT_TRUE(after->ok());
}

TEST_F(RepairTest, AnArchivedRowWithoutAVoucherMovesBackToOutboxAsSending) {
  Booked("p1");
  Booked("p2");
  Archive("p1");
  Archive("p2");
  LoseBooking("p1");
  EXPECT_EQ(RunAndPrint(), kExitOk);
  EXPECT_EQ(Query("SELECT message_id, status, attempts, next_retry_at, last_error FROM outbox"),
            absl::StrCat("m-p1|SENDING|0|", kNowMs, "|repaired: archived SENT without a voucher"));
  EXPECT_EQ(Query("SELECT message_id FROM outbox_archive"), "m-p2");
  // Everything else of the row came along.
  EXPECT_EQ(Query("SELECT biz_type, biz_key, topic, hex(payload), created_at FROM outbox"),
            absl::StrCat("payment|p1|PAY_QUEUE|00|", kMinuteAgo));
  ASSERT_EQ(Audit().size(), 1u);
  EXPECT_EQ(Audit()[0].target, kRepairArchivedWithoutVoucher);
  EXPECT_EQ(ReadHistory(*pay_, "m-p1").size(), 1u);
  absl::StatusOr<Report> after = RunChecks(config_, kNow);
  ASSERT_OK(after);
  EXPECT_TRUE(after->ok());
}

TEST_F(RepairTest, AMessageAccountingProcessedWithoutAVoucherIsLeftToAnOperator) {
  Booked("p1");
  acc_->exec("DELETE FROM vouchers WHERE payment_id = 'p1'");  // the processed id stays
  const std::string before = Rows();
  std::string out;
  EXPECT_EQ(RunAndPrint(&out), kExitViolation);
  EXPECT_EQ(Rows(), before);
  EXPECT_TRUE(Audit().empty());
  EXPECT_THAT(out, HasSubstr("sent_without_voucher p1: accounting.db has processed message m-p1"));
  EXPECT_THAT(out, HasSubstr("DELETE FROM processed_messages WHERE message_id = 'm-p1'"));
  EXPECT_THAT(out, HasSubstr("repair result: OPERATOR NEEDED"));
  // What the task says, done: the repair can then send it again.
  acc_->exec("DELETE FROM processed_messages WHERE message_id = 'm-p1'");
  EXPECT_EQ(RunAndPrint(), kExitOk);
  EXPECT_EQ(Status("p1"), "SENDING");
}

TEST_F(RepairTest, AnArchivedRowWhosePaymentHasALiveRowIsNotMoved) {
  Booked("p1");
  Archive("p1");
  LoseBooking("p1");
  Row("p1", "SENDING");  // written again by hand
  pay_->exec("UPDATE outbox SET message_id = 'm-p1-again'");
  std::string out;
  EXPECT_EQ(RunAndPrint(&out), kExitViolation);
  EXPECT_THAT(out, HasSubstr("archived message m-p1 has a row in outbox as well"));
  EXPECT_EQ(Query("SELECT count(*) FROM outbox_archive"), "1");
  EXPECT_TRUE(Audit().empty());
}

TEST_F(RepairTest, WhatCannotBeRepairedIsListedWithWhatToDoAndNothingChanges) {
  Booked("ok");
  Voucher("no-payment");  // voucher_without_payment
  Payment("no-row");      // payment_without_outbox
  Voucher("no-row");
  Payment("other-amount");  // voucher_amount_mismatch
  Row("other-amount", "SENT");
  Voucher("other-amount", 999);
  Booked("twice");  // payment_multiple_vouchers: on two shards
  const std::string shard2 = dir_.path() + "/accounting-1.db";
  std::unique_ptr<SQLite::Database> acc2 = Create(shard2, accounting::AccountingDbSchema());
  Voucher(*acc2, "twice");
  acc2->exec("UPDATE vouchers SET voucher_id = 'v-twice-2'");
  config_.accounting_db = acc_path_ + "," + shard2;
  const std::string before = Rows();
  std::string out;
  EXPECT_EQ(RunAndPrint(&out), kExitViolation);
  EXPECT_EQ(Rows(), before);
  EXPECT_TRUE(Audit().empty());
  for (const char* line :
       {"voucher_without_payment no-payment: accounting booked a payment that payment.db does not "
        "hold",
        "payment_without_outbox no-row: no outbox row", "outboxctl voucher get no-row",
        "voucher_amount_mismatch other-amount: the voucher books another amount",
        "payment_multiple_vouchers twice: booked more than once"}) {
    EXPECT_THAT(out, HasSubstr(line));
  }
}

TEST_F(RepairTest, RunningItTwiceChangesNothingTheSecondTime) {
  for (const char* id : {"p1", "p2", "p3"}) Booked(id);
  LoseBooking("p1");
  Archive("p2");
  LoseBooking("p2");
  pay_->exec("UPDATE outbox SET status = 'FAILED' WHERE biz_key = 'p3'");
  EXPECT_EQ(RunAndPrint(), kExitOk);
  const std::string rows = Rows();
  const size_t audit = Audit().size();
  const int64_t history = CountHistory(*pay_);
  EXPECT_EQ(audit, 3u);
  EXPECT_EQ(history, 3);
  std::string out;
  EXPECT_EQ(RunAndPrint(&out), kExitOk);
  EXPECT_THAT(out, HasSubstr("nothing to repair"));
  EXPECT_EQ(Rows(), rows);
  EXPECT_EQ(Audit().size(), audit);
  EXPECT_EQ(CountHistory(*pay_), history);
}

TEST_F(RepairTest, EachPageCommitsWithTheOneAuditRecordCountingWhatIsCommitted) {
  for (int i = 0; i < 5; ++i) Booked(absl::StrCat("p", i));
  for (int i = 0; i < 5; ++i) LoseBooking(absl::StrCat("p", i));
  options_.page_size = 2;
  absl::StatusOr<RepairResult> result = RunRepair();
  ASSERT_OK(result);
  ASSERT_EQ(result->actions.size(), 1u);
  EXPECT_EQ(result->actions[0].payment_ids.size(), 5u);
  std::vector<AuditRecord> audit = Audit();
  ASSERT_EQ(audit.size(), 1u);
  EXPECT_EQ(audit[0].rows, 5);
  EXPECT_EQ(audit[0].outcome, "ok");
  EXPECT_EQ(Query("SELECT count(*) FROM outbox WHERE status = 'SENDING'"), "5");
}

TEST_F(RepairTest, ARowThatChangedAfterItWasReadIsLeftAlone) {
  Payment("p1");
  Row("p1", "FAILED");
  Voucher("p1");
  absl::StatusOr<Report> report = RunChecks(config_, kNow);
  ASSERT_OK(report);
  absl::StatusOr<RepairCandidates> candidates = FindRepairCandidates(config_);
  ASSERT_OK(candidates);
  // The late acknowledgement arrives in between.
  pay_->exec("UPDATE outbox SET status = 'SENT', sent_at = 5, failure_kind = ''");
  absl::StatusOr<RepairResult> result = Repair(config_, *report, *candidates, options_, kNow);
  ASSERT_OK(result);
  ASSERT_EQ(result->actions.size(), 1u);
  EXPECT_TRUE(result->actions[0].payment_ids.empty());
  EXPECT_EQ(result->actions[0].skipped, std::vector<std::string>{"p1"});
  EXPECT_FALSE(result->complete());
  EXPECT_EQ(Query("SELECT status, sent_at FROM outbox"), "SENT|5");
  EXPECT_EQ(CountHistory(*pay_), 0);
  ASSERT_EQ(Audit().size(), 1u);
  EXPECT_EQ(Audit()[0].rows, 0);
}

TEST_F(RepairTest, WhileAWriterHoldsTheFileItGivesUpAndChangesNothing) {
  Booked("p1");
  LoseBooking("p1");
  const std::string before = Rows();
  SQLite::Database writer(pay_path_, SQLite::OPEN_READWRITE);
  writer.exec("BEGIN IMMEDIATE");
  options_.busy_timeout_ms = 20;
  EXPECT_THAT(RunRepair().status(), StatusIs(absl::StatusCode::kUnavailable));
  writer.exec("ROLLBACK");
  EXPECT_EQ(Rows(), before);
  EXPECT_TRUE(Audit().empty());
}

TEST_F(RepairTest, APaymentDbOlderThanTheRepairNeedsIsRefused) {
  pay_.reset();
  std::filesystem::remove(pay_path_);
  std::filesystem::remove(pay_path_ + "-wal");
  std::filesystem::remove(pay_path_ + "-shm");
  pay_ = Create(pay_path_, PaymentDbSchema(), kRepairPaymentDbSchemaVersion - 1);
  pay_->exec(
      "INSERT INTO payments (payment_id, idempotency_key, payer_account, payee_account, "
      "amount_minor, currency, description, created_at) VALUES ('p1', 'k', 'A', 'B', 1, "
      "'EUR', '', 1)");
  pay_->exec(
      "INSERT INTO outbox (message_id, biz_type, biz_key, topic, payload, status, "
      "max_attempts, next_retry_at, created_at, updated_at) VALUES ('m-p1', 'payment', "
      "'p1', 'PAY_QUEUE', x'00', 'SENT', 3, 1, 1, 1)");
  std::string out;
  EXPECT_EQ(RunAndPrint(&out), kExitError);
  EXPECT_THAT(
      out, HasSubstr(absl::StrCat("has schema version ", kRepairPaymentDbSchemaVersion - 1,
                                  "; the repair needs version ", kRepairPaymentDbSchemaVersion)));
  EXPECT_EQ(Status("p1"), "SENT");
}

TEST_F(RepairTest, JsonIsTheReportWithTheRepairInIt) {
  Booked("p1");
  LoseBooking("p1");
  Voucher("no-payment");
  options_.apply = false;
  std::ostringstream out, err;
  EXPECT_EQ(RunRepairAndPrint(config_, options_, kNow, /*json=*/true, out, err), kExitViolation);
  const std::string json = out.str();
  EXPECT_THAT(json, HasSubstr("\"ok\": false, \"repair\": {\"applied\": false, \"actions\": "
                              "[{\"target\": \"sent_without_voucher\", \"rows\": 1, "
                              "\"payment_ids\": [\"p1\"], \"skipped\": []}]"));
  EXPECT_THAT(json, HasSubstr("{\"check\": \"voucher_without_payment\", \"payment_id\": "
                              "\"no-payment\""));
  EXPECT_THAT(json, HasSubstr("\"complete\": false}}\n"));
}

}  // namespace
}  // namespace outbox::checker
