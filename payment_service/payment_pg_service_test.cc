// payment_service itself on PostgreSQL (PAYMENT_DB a postgresql:// URI), on
// a server of scripts/postgres_node.sh and the test run's RabbitMQ node,
// with the real accounting_service on SQLite: payments created over gRPC go
// out on PAY_QUEUE and turn SENT; two payment_service processes on one
// database make one payment per key and close each other's rows; start-up
// faults exit non-zero with a clear line and no password; a database gone
// while serving answers UNAVAILABLE; creates held while accounting lags. Each test gets a
// PostgreSQL schema (search_path) of its own.

#include <stdio.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/observability/internal/http_client.h"
#include "shared/postgres/pg_connection.h"
#include "shared/testing/pg_servers.h"
#include "shared/testing/status_matchers.h"
#include "tests/support/alertmanager.h"
#include "tests/support/process.h"
#include "tests/support/services.h"

namespace outbox::testing {
namespace {

using ::payment::v1::CreatePaymentRequest;
using ::payment::v1::CreatePaymentResponse;
using ::testing::HasSubstr;
using ::testing::Not;

PgServersEnvironment* const kServer = AddPgServers("payment_pg_service_test");

CreatePaymentRequest Request(const std::string& key, int64_t amount = 100) {
  CreatePaymentRequest r;
  r.set_idempotency_key(key);
  r.set_payer_account("acct-alice");
  r.set_payee_account("acct-bob");
  r.set_amount_minor(amount);
  r.set_currency("EUR");
  r.set_description("pg");
  return r;
}

grpc::Status Create(::payment::v1::PaymentService::StubInterface& stub,
                    const CreatePaymentRequest& req, CreatePaymentResponse* resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(absl::Seconds(20)));
  return stub.CreatePayment(&ctx, req, resp);
}

std::vector<::payment::v1::Payment> ListAll(::payment::v1::PaymentService::StubInterface& stub) {
  std::vector<::payment::v1::Payment> all;
  std::string token;
  do {
    ::payment::v1::ListPaymentsRequest req;
    req.set_page_size(7);  // several pages
    req.set_page_token(token);
    ::payment::v1::ListPaymentsResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineIn(absl::Seconds(10)));
    grpc::Status s = stub.ListPayments(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    if (!s.ok()) break;
    for (const auto& p : resp.payments()) all.push_back(p);
    token = resp.next_page_token();
  } while (!token.empty());
  return all;
}

bool AllSent(const std::vector<::payment::v1::Payment>& payments, size_t n) {
  if (payments.size() != n) return false;
  for (const auto& p : payments) {
    if (p.outbox().status() != ::payment::v1::SENT) return false;
  }
  return true;
}

class PaymentOnPostgresTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> next{0};
    schema_ = absl::StrCat("s", next++);
    conninfo_ = FreshPgSchema(kServer->url(), schema_);
    ASSERT_FALSE(conninfo_.empty());
    auto admin = PgConnection::Open(kServer->url());
    ASSERT_OK(admin);
    admin_ = std::move(admin).value();
  }

  int64_t Count(const std::string& sql) { return PgCount(*admin_, sql); }

  // Another payment_service process on the same settings; its port.
  int StartAnother(ServiceSet& services, Process& p, const std::string& db) {
    Env env = services.ServiceEnv("outbox-payment");
    env["PAYMENT_DB"] = db;
    env["PAYMENT_LISTEN"] = "127.0.0.1:0";
    p.Start(BinaryPath("payment_service"), {}, env, services.dir() + "/payment_b.log");
    const std::string log = p.WaitForLog("payment_service_started", absl::Seconds(30));
    int port = 0;
    EXPECT_TRUE(absl::SimpleAtoi(LogField(log, "payment_service_started", "port"), &port))
        << p.Log();
    return port;
  }

  std::string schema_;
  std::string conninfo_;
  std::unique_ptr<PgConnection> admin_;
};

TEST_F(PaymentOnPostgresTest, PaymentsGoOutOnPayQueueAndTurnSent) {
  ServiceSet services;
  services.StartAccounting();
  services.StartPayment({{"PAYMENT_DB", conninfo_}});
  constexpr int kPayments = 20;
  std::vector<std::string> ids;
  for (int i = 0; i < kPayments; ++i) {
    CreatePaymentResponse resp;
    grpc::Status s = Create(services.payments(), Request(absl::StrCat("key-", i)), &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_FALSE(resp.replayed());
    ids.push_back(resp.payment().payment_id());
  }
  CreatePaymentResponse replay;
  ASSERT_TRUE(Create(services.payments(), Request("key-3"), &replay).ok());
  EXPECT_TRUE(replay.replayed());
  EXPECT_EQ(replay.payment().payment_id(), ids[3]);
  CreatePaymentResponse refused;
  grpc::Status conflict = Create(services.payments(), Request("key-3", 5), &refused);
  EXPECT_EQ(conflict.error_code(), grpc::StatusCode::ALREADY_EXISTS);
  EXPECT_THAT(conflict.error_message(), HasSubstr("idempotency_key 'key-3'"));
  grpc::Status invalid = Create(services.payments(), Request("key-x", 0), &refused);
  EXPECT_EQ(invalid.error_code(), grpc::StatusCode::INVALID_ARGUMENT);

  std::vector<::payment::v1::Payment> all;
  EXPECT_TRUE(PollUntil(
      [&] {
        all = ListAll(services.payments());
        return AllSent(all, kPayments);
      },
      absl::Seconds(60)))
      << all.size() << " payments listed";
  EXPECT_EQ(services.AllVouchers().size(), static_cast<size_t>(kPayments));
  EXPECT_EQ(Count("SELECT count(*) FROM " + schema_ + ".outbox WHERE status = 'SENT'"), kPayments);

  ::payment::v1::GetPaymentRequest get;
  get.set_payment_id(ids[5]);
  ::payment::v1::Payment got;
  grpc::ClientContext ctx;
  ASSERT_TRUE(services.payments().GetPayment(&ctx, get, &got).ok());
  EXPECT_EQ(got.idempotency_key(), "key-5");
  EXPECT_EQ(got.outbox().status(), ::payment::v1::SENT);
  EXPECT_EQ(services.payment().Terminate(), 0);
  EXPECT_THAT(services.payment().Log(), HasSubstr("payment_service_started"));
  EXPECT_THAT(services.payment().Log(),
              Not(HasSubstr(PgNodePassword(kServer->servers().primary()))));
}

// MAX_UNSENT and MAX_HOLD_MS act on PostgreSQL as on SQLite: with a bound of
// one SENDING payment, creates from a closed loop of callers are held
// while accounting replies (outbox_writer_holds_total), and every payment
// still turns SENT.
TEST_F(PaymentOnPostgresTest, CreatesWaitForAccountingsBacklog) {
  const int metrics_port = FreeLoopbackPort();
  ServiceSet services;
  services.StartAccounting();
  services.StartPayment({{"PAYMENT_DB", conninfo_},
                         {"MAX_UNSENT", "1"},
                         {"MAX_HOLD_MS", "1000"},
                         {"PAYMENT_METRICS_LISTEN", absl::StrCat("127.0.0.1:", metrics_port)}});
  auto holds = [&]() -> int64_t {
    auto r = HttpGet(absl::StrCat("http://127.0.0.1:", metrics_port, "/metrics"), absl::Seconds(5));
    if (!r.ok()) return -1;
    const std::string name = "\noutbox_writer_holds_total ";
    const size_t at = r->body.find(name);
    if (at == std::string::npos) return -1;
    double value = 0;
    const size_t start = at + name.size();
    if (!absl::SimpleAtod(r->body.substr(start, r->body.find('\n', start) - start), &value)) {
      return -1;
    }
    return static_cast<int64_t>(value);
  };
  std::atomic<bool> stop{false};
  std::atomic<int> created{0}, failed{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; !stop.load() && i < 2000; ++i) {
        CreatePaymentResponse resp;
        if (Create(services.payments(), Request(absl::StrCat("held-", t, "-", i)), &resp).ok()) {
          ++created;
        } else {
          ++failed;
        }
      }
    });
  }
  int64_t held = 0;
  EXPECT_TRUE(PollUntil(
      [&] {
        held = holds();
        return held > 0;
      },
      absl::Seconds(60)))
      << "outbox_writer_holds_total " << held << " after " << created.load() << " creates";
  stop = true;
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(failed.load(), 0);
  std::vector<::payment::v1::Payment> all;
  EXPECT_TRUE(PollUntil(
      [&] {
        all = ListAll(services.payments());
        return AllSent(all, static_cast<size_t>(created.load()));
      },
      absl::Seconds(60)))
      << all.size() << " payments listed, " << created.load() << " created";
  printf("held %lld times in %d creates\n", static_cast<long long>(held), created.load());
  EXPECT_EQ(services.payment().Terminate(), 0);
}

// Two processes on one database: the same key sent to both at once is one
// payment; replies for rows one wrote are applied by the other.
TEST_F(PaymentOnPostgresTest, TwoProcessesOnOneDatabaseMakeOnePaymentPerKey) {
  ServiceSet services;
  services.StartPayment({{"PAYMENT_DB", conninfo_}});
  Process b;
  const int b_port = StartAnother(services, b, conninfo_);
  ASSERT_GT(b_port, 0);
  auto b_stub = ::payment::v1::PaymentService::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", b_port), grpc::InsecureChannelCredentials()));

  constexpr int kKeys = 20;
  for (int i = 0; i < kKeys; ++i) {
    const std::string key = absl::StrCat("both-", i);
    CreatePaymentResponse ra, rb;
    grpc::Status sa, sb;
    std::thread ta([&] { sa = Create(services.payments(), Request(key), &ra); });
    std::thread tb([&] { sb = Create(*b_stub, Request(key), &rb); });
    ta.join();
    tb.join();
    // One created it; the other replayed it, or was refused naming the key.
    ASSERT_TRUE(sa.ok() || sb.ok()) << sa.error_message() << " / " << sb.error_message();
    int created = 0;
    for (const auto& [s, r] : {std::make_pair(sa, ra), std::make_pair(sb, rb)}) {
      if (s.ok()) {
        created += r.replayed() ? 0 : 1;
      } else {
        EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS) << s.error_message();
        EXPECT_THAT(s.error_message(), HasSubstr("idempotency_key '" + key + "'"));
      }
    }
    EXPECT_EQ(created, 1) << key;
    if (sa.ok() && sb.ok()) EXPECT_EQ(ra.payment().payment_id(), rb.payment().payment_id());
  }
  EXPECT_EQ(Count("SELECT count(*) FROM " + schema_ + ".payments"), kKeys);

  // Rows only the first process wrote; it stops before any reply is there,
  // so the second applies them.
  constexpr int kOnlyA = 5;
  for (int i = 0; i < kOnlyA; ++i) {
    CreatePaymentResponse r;
    ASSERT_TRUE(Create(services.payments(), Request(absl::StrCat("a-", i)), &r).ok());
  }
  ASSERT_EQ(services.payment().Terminate(), 0);
  services.StartAccounting();
  std::vector<::payment::v1::Payment> all;
  EXPECT_TRUE(PollUntil(
      [&] {
        all = ListAll(*b_stub);
        return AllSent(all, kKeys + kOnlyA);
      },
      absl::Seconds(60)))
      << all.size() << " payments listed";
  EXPECT_EQ(services.AllVouchers().size(), static_cast<size_t>(kKeys + kOnlyA));
  EXPECT_EQ(b.Terminate(), 0);
}

TEST_F(PaymentOnPostgresTest, StartUpFaultsExitNonZeroWithoutThePassword) {
  ServiceSet services;
  Env env = services.ServiceEnv("outbox-payment");
  env["PAYMENT_LISTEN"] = "127.0.0.1:0";
  const std::string secret = "not-the-password-7q";
  // The server's address, with a password in the URI (wrong) and no passfile.
  const std::string hostport = absl::StrCat("127.0.0.1:", PgNodePort(kServer->servers().primary()));
  auto run = [&](const std::string& db, const std::string& name,
                 std::vector<std::string> args = {}) {
    Env e = env;
    e["PAYMENT_DB"] = db;
    return RunToCompletion(BinaryPath("payment_service"), args, e, services.dir() + "/" + name);
  };

  CommandResult wrong =
      run(absl::StrCat("postgresql://outbox:", secret, "@", hostport, "/outbox"), "wrong");
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_THAT(wrong.out + wrong.err, HasSubstr("password authentication failed"));
  EXPECT_THAT(wrong.out + wrong.err, Not(HasSubstr(secret)));

  CommandResult unreachable = run(absl::StrCat("postgresql://outbox@127.0.0.1:", ClosedLocalPort(),
                                               "/outbox?connect_timeout=2"),
                                  "unreachable");
  EXPECT_NE(unreachable.exit_code, 0);
  EXPECT_THAT(unreachable.out + unreachable.err, HasSubstr("127.0.0.1"));

  ASSERT_OK(admin_->Exec(absl::StrCat("CREATE TABLE ", schema_,
                                      ".schema_version (name TEXT PRIMARY KEY, version INTEGER "
                                      "NOT NULL); INSERT INTO ",
                                      schema_, ".schema_version VALUES ('payment', 99)")));
  CommandResult newer = run(conninfo_, "newer");
  EXPECT_NE(newer.exit_code, 0);
  EXPECT_THAT(newer.out + newer.err,
              HasSubstr("schema payment has version 99; this payment_service knows up to"));
  EXPECT_EQ(Count("SELECT count(*) FROM information_schema.tables WHERE table_schema = '" +
                  schema_ + "'"),
            1);  // untouched: no outbox tables made

  CommandResult help = run(absl::StrCat("postgresql://outbox:", secret, "@", hostport, "/outbox"),
                           "help", {"--help"});
  EXPECT_THAT(help.out + help.err, HasSubstr("--payment_db"));
  EXPECT_THAT(help.out + help.err, Not(HasSubstr(secret)));
}

// The crash points around the commit (OUTBOX_FAILPOINTS) on PgGroupWriter:
// killed before the commit nothing is written; killed after it the payment
// is there, SENDING, and its key replays once the service is back.
TEST_F(PaymentOnPostgresTest, CrashPointsAroundTheCommit) {
  ServiceSet services;
  const std::string payments = "SELECT count(*) FROM " + schema_ + ".payments";
  struct Case {
    const char* point;
    int64_t rows_after;
  };
  int64_t rows = 0;
  for (const Case& c :
       {Case{"payment.before_commit", 0}, Case{"payment.after_commit_before_publish", 1}}) {
    SCOPED_TRACE(c.point);
    services.StartPayment(
        {{"PAYMENT_DB", conninfo_}, {"OUTBOX_FAILPOINTS", absl::StrCat(c.point, "=crash@1")}});
    CreatePaymentResponse r;
    EXPECT_FALSE(Create(services.payments(), Request(c.point), &r).ok());
    ASSERT_TRUE(PollUntil([&] { return !services.payment().Running(); }, absl::Seconds(30)));
    EXPECT_EQ(services.payment().exit_code(), 128 + 9);  // SIGKILL
    EXPECT_THAT(services.payment().Log(),
                HasSubstr(absl::StrCat("failpoint_crash point=", c.point)));
    rows += c.rows_after;
    EXPECT_EQ(Count(payments), rows);
    services.StartPayment({{"PAYMENT_DB", conninfo_}});
    grpc::Status again = Create(services.payments(), Request(c.point), &r);
    ASSERT_TRUE(again.ok()) << again.error_message();
    EXPECT_EQ(r.replayed(), c.rows_after == 1);
    if (c.rows_after == 1) EXPECT_EQ(r.payment().outbox().status(), ::payment::v1::SENDING);
    rows += 1 - c.rows_after;
    EXPECT_EQ(Count(payments), rows);
    EXPECT_EQ(services.payment().Terminate(), 0);
  }
}

// A database gone while serving: CreatePayment answers UNAVAILABLE, and
// works again once the server is back.
TEST_F(PaymentOnPostgresTest, ACreateWhileTheDatabaseIsGoneIsUnavailable) {
  PgServers own("payment_pg_service_test_gone");
  ASSERT_TRUE(own.ok());
  const std::string node = own.primary();
  const std::string db = own.url();
  ServiceSet services;
  services.StartPayment({{"PAYMENT_DB", db}});
  CreatePaymentResponse r;
  ASSERT_TRUE(Create(services.payments(), Request("before"), &r).ok());
  ASSERT_TRUE(PgServers::Kill(node));
  grpc::Status gone = Create(services.payments(), Request("while-gone"), &r);
  EXPECT_EQ(gone.error_code(), grpc::StatusCode::UNAVAILABLE) << gone.error_message();
  ASSERT_TRUE(PgServers::Start(node));
  grpc::Status back;
  EXPECT_TRUE(PollUntil(
      [&] {
        back = Create(services.payments(), Request("after"), &r);
        return back.ok();
      },
      absl::Seconds(30)))
      << back.error_message();
  EXPECT_EQ(services.payment().Terminate(), 0);
}

}  // namespace
}  // namespace outbox::testing
