// Schema versions with the real binaries: a payment.db newer than the binary
// is refused with exit 2 and left byte for byte as it was (payment_service,
// recovery_service, outbox_check); a payment.db made by every earlier schema
// (tests/fixtures/db) is upgraded in place and served; two payment_services
// started together on an old file upgrade it once between them.
#include <SQLiteCpp/SQLiteCpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/channel.h"
#include "service_kit/payment_db_schema.h"
#include "shared/testing/status_matchers.h"
#include "tests/support/services.h"

namespace outbox::testing {
namespace {

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::string Fixture(const std::string& name) {
  return absl::StrCat(OUTBOX_SOURCE_DIR, "/tests/fixtures/db/", name);
}

int Occurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// payment.db as a later release would leave it: WAL mode, closed cleanly, a
// table this binary has never heard of, user_version `version`.
void MakeNewerPaymentDb(const std::string& path, int version) {
  SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
  db.exec("PRAGMA journal_mode=WAL");
  db.exec("CREATE TABLE payments_v2 (id INTEGER PRIMARY KEY, payment_id TEXT NOT NULL)");
  db.exec("INSERT INTO payments_v2 (payment_id) VALUES ('from-a-later-release')");
  db.exec(absl::StrCat("PRAGMA user_version = ", version));
}

class SchemaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    newer_ = services_.dir() + "/payment.db";
    MakeNewerPaymentDb(newer_, newer_version_);
    before_ = Bytes(newer_);
    ASSERT_FALSE(before_.empty());
  }
  // Nothing written, nothing created beside it.
  void ExpectUntouched() {
    EXPECT_EQ(Bytes(newer_), before_) << newer_ << " changed";
    EXPECT_FALSE(std::filesystem::exists(newer_ + "-wal"));
    EXPECT_FALSE(std::filesystem::exists(newer_ + "-shm"));
  }
  std::string Refusal(const std::string& program) const {
    return absl::StrCat(newer_, " has schema version ", newer_version_, "; this ", program,
                        " knows up to ", PaymentDbSchema().latest(),
                        ": refusing to open a newer file");
  }

  // One past the version this build knows.
  const int newer_version_ = PaymentDbSchema().latest() + 1;
  ServiceSet services_;  // the broker, queues and a temp dir; it starts nothing here
  std::string newer_;
  std::string before_;
};

TEST_F(SchemaTest, PaymentServiceRefusesANewerPaymentDbWithExitTwo) {
  Env env = services_.ServiceEnv();
  env["PAYMENT_LISTEN"] = "127.0.0.1:0";
  Process payment;
  payment.Start(BinaryPath("payment_service"), {}, env, services_.dir() + "/payment.log");
  EXPECT_EQ(payment.WaitExit(absl::Seconds(30)), 2) << payment.Log();
  EXPECT_NE(payment.Log().find(absl::StrCat("payment_service_failed error=\"FAILED_PRECONDITION: ",
                                            Refusal("payment_service"), "\"")),
            std::string::npos)
      << payment.Log();
  ExpectUntouched();
}

TEST_F(SchemaTest, RecoveryServiceRefusesANewerPaymentDbWithExitTwo) {
  Env env = services_.ServiceEnv();
  env["RECOVERY_LISTEN"] = "127.0.0.1:0";
  Process recovery;
  recovery.Start(BinaryPath("recovery_service"), {}, env, services_.dir() + "/recovery.log");
  EXPECT_EQ(recovery.WaitExit(absl::Seconds(30)), 2) << recovery.Log();
  EXPECT_NE(
      recovery.Log().find(absl::StrCat("recovery_service_failed error=\"FAILED_PRECONDITION: ",
                                       Refusal("recovery_service"), "\"")),
      std::string::npos)
      << recovery.Log();
  EXPECT_EQ(recovery.Log().find("waiting_for_payment_db"), std::string::npos)
      << "a newer file is no reason to wait";
  ExpectUntouched();
}

TEST_F(SchemaTest, OutboxCheckRefusesANewerPaymentDbWithExitTwo) {
  const std::string accounting = services_.dir() + "/accounting.db";
  std::filesystem::copy_file(Fixture("accounting-v2.db"), accounting);
  CommandResult r = RunToCompletion(BinaryPath("outbox_check"),
                                    {"--payment_db=" + newer_, "--accounting_db=" + accounting}, {},
                                    services_.dir() + "/outbox_check");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_EQ(r.err, absl::StrCat("outbox_check: ", newer_, " has schema version ", newer_version_,
                                "; this outbox_check knows up to ", PaymentDbSchema().latest(),
                                ": refusing to check a newer file\n"));
  EXPECT_EQ(Bytes(newer_), before_);
}

// payment.db from every schema before versioning: today's payment_service
// upgrades it in place and serves its payments.
TEST(SchemaUpgradeTest, PaymentServiceServesEveryEarlierPaymentDb) {
  for (int version = 1; version <= 4; ++version) {
    SCOPED_TRACE(absl::StrCat("payment-v", version, ".db"));
    ServiceSet services;
    const std::string db = services.dir() + "/payment.db";
    std::filesystem::copy_file(Fixture(absl::StrCat("payment-v", version, ".db")), db);
    services.StartPayment();
    // Migrations before the fixture's version find their changes there and
    // add nothing, but each still commits its version.
    for (int to = 1; to <= PaymentDbSchema().latest(); ++to) {
      EXPECT_EQ(
          Occurrences(services.payment().Log(), absl::StrCat("from=", to - 1, " to=", to, " ")), 1)
          << services.payment().Log();
    }

    ::payment::v1::GetPaymentRequest req;
    req.set_payment_id("pay-fixture-2");
    ::payment::v1::Payment p;
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineIn(absl::Seconds(10)));
    grpc::Status s = services.payments().GetPayment(&ctx, req, &p);
    ASSERT_OK(client::FromGrpc(s, "GetPayment"));
    EXPECT_EQ(p.idempotency_key(), "key-fixture-2");
    EXPECT_EQ(p.payer_account(), "acct-carol");
    EXPECT_EQ(p.payee_account(), "acct-bob");
    EXPECT_EQ(p.amount_minor(), 990);
    EXPECT_EQ(p.currency(), "EUR");
    EXPECT_EQ(p.description(), "books");
    EXPECT_EQ(p.outbox().message_id(), "msg-fixture-2");
    EXPECT_EQ(p.outbox().status(), ::payment::v1::SENDING);
    EXPECT_EQ(p.outbox().attempts(), 3);
    EXPECT_EQ(p.outbox().max_attempts(), 10);
    EXPECT_EQ(p.outbox().next_retry_at().seconds(), 1700000095);
    EXPECT_EQ(p.outbox().last_error(), "publish: no confirm within 5s");
    EXPECT_EQ(p.outbox().trace_id(), version >= 4 ? "4bf92f3577b34da6a3ce929d0e0e4736" : "");

    ::payment::v1::GetPaymentRequest failed_req;
    failed_req.set_payment_id("pay-fixture-3");
    grpc::ClientContext failed_ctx;
    failed_ctx.set_deadline(DeadlineIn(absl::Seconds(10)));
    s = services.payments().GetPayment(&failed_ctx, failed_req, &p);
    ASSERT_OK(client::FromGrpc(s, "GetPayment"));
    EXPECT_EQ(p.outbox().status(), ::payment::v1::FAILED);
    EXPECT_EQ(p.outbox().attempts(), 10);

    // New payments go in beside the old ones.
    ::payment::v1::CreatePaymentRequest create;
    create.set_idempotency_key(absl::StrCat("after-upgrade-", version));
    create.set_payer_account("acct-alice");
    create.set_payee_account("acct-bob");
    create.set_amount_minor(100);
    create.set_currency("EUR");
    ::payment::v1::CreatePaymentResponse created;
    grpc::ClientContext create_ctx;
    create_ctx.set_deadline(DeadlineIn(absl::Seconds(10)));
    s = services.payments().CreatePayment(&create_ctx, create, &created);
    EXPECT_OK(client::FromGrpc(s, "CreatePayment"));
    EXPECT_EQ(services.payment().Terminate(), 0) << services.payment().Log();

    SQLite::Database file(db, SQLite::OPEN_READONLY);
    EXPECT_EQ(file.execAndGet("PRAGMA user_version").getInt(), PaymentDbSchema().latest());
    EXPECT_EQ(file.execAndGet("SELECT count(*) FROM payments").getInt(), 5);
  }
}

// Two payment_services and a recovery_service started at the same moment on
// the oldest payment.db: each migration is applied once between them, and
// all three come up.
TEST(SchemaUpgradeTest, ServicesStartedTogetherUpgradeAnOldFileOnce) {
  ServiceSet services;
  const std::string db = services.dir() + "/payment.db";
  std::filesystem::copy_file(Fixture("payment-v1.db"), db);
  Env env = services.ServiceEnv();
  env["PAYMENT_LISTEN"] = "127.0.0.1:0";
  env["RECOVERY_LISTEN"] = "127.0.0.1:0";
  env["RECOVERY_INSTANCE_ID"] = "schema-r1";
  struct Launched {
    std::string name;
    std::unique_ptr<Process> process = std::make_unique<Process>();
  };
  std::vector<Launched> launched;
  for (const char* name : {"payment_service", "recovery_service", "payment_service"}) {
    launched.push_back({name});
    launched.back().process->Start(
        BinaryPath(name), {}, env,
        absl::StrCat(services.dir(), "/", launched.size(), "_", name, ".log"));
  }
  std::string logs;
  for (Launched& l : launched) {
    const std::string started = absl::StrCat(l.name, "_started");
    EXPECT_NE(l.process->WaitForLog(started, absl::Seconds(30)), "") << l.process->Log();
    logs += l.process->Log();
  }
  for (int to = 1; to <= PaymentDbSchema().latest(); ++to) {
    EXPECT_EQ(Occurrences(logs, absl::StrCat("from=", to - 1, " to=", to, " ")), 1) << logs;
  }
  for (Launched& l : launched) EXPECT_EQ(l.process->Terminate(), 0) << l.process->Log();
  SQLite::Database file(db, SQLite::OPEN_READONLY);
  EXPECT_EQ(file.execAndGet("PRAGMA user_version").getInt(), PaymentDbSchema().latest());
  EXPECT_EQ(file.execAndGet("SELECT count(*) FROM payments").getInt(), 4);
  // Recovery's retention may have archived the two old SENT rows already
  // (their columns line up with the upgraded archive's) and, years past the
  // archive's retention too, deleted them (counted in outbox_retention).
  EXPECT_EQ(file.execAndGet("SELECT (SELECT count(*) FROM outbox) + "
                            "(SELECT count(*) FROM outbox_archive) + "
                            "(SELECT coalesce(sum(pruned_rows), 0) FROM outbox_retention "
                            " WHERE name = 'outbox_archive')")
                .getInt(),
            4);
  EXPECT_EQ(file.execAndGet("SELECT count(*) FROM outbox WHERE status != 'SENT'").getInt(), 2);
}

}  // namespace
}  // namespace outbox::testing
