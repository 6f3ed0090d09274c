// recovery_service on PostgreSQL (PAYMENT_DB a libpq URI): the real binary
// on a server of scripts/postgres_node.sh and the test run's RabbitMQ node.
// Rows written by the library's PgOutbox, as payment_service writes them,
// are re-published when due or failed when their attempts are spent; the
// ops API (and outboxctl over it) lists, re-drives and shows the history on
// the database; two instances share one database; and a database that
// cannot be used stops the start with one clear line, never the password.
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ops/v1/ops.grpc.pb.h"
#include "service_kit/topology.h"
#include "shared/amqp/amqp_url.h"
#include "shared/amqp/internal/amqp_transport.h"
#include "shared/observability/internal/http_client.h"
#include "shared/postgres/internal/pg_outbox.h"
#include "shared/postgres/pg_connection.h"
#include "shared/postgres/pg_schema.h"
#include "shared/postgres/pg_session.h"
#include "shared/testing/manual_clock.h"
#include "shared/testing/pg_servers.h"
#include "shared/testing/status_matchers.h"
#include "shared/testing/temp_dir.h"
#include "tests/support/broker.h"
#include "tests/support/process.h"
#include "tests/support/services.h"

namespace outbox::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

PgServersEnvironment* const kServer = AddPgServers("pg_recovery_service_test");

// "%XX" for each byte of `s` a URI's user info may not hold as it is.
std::string PercentEncoded(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      absl::StrAppend(&out, "%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

class PgRecoveryServiceTest : public ::testing::Test {
 protected:
  static constexpr int64_t kHour = 3'600'000;

  void SetUp() override {
    conninfo_ = kServer->FreshSchema();
    ASSERT_FALSE(conninfo_.empty());
    broker_ = TestBroker();
    pay_queue_ = UniqueName("pgrec.pay");
    acc_queue_ = UniqueName("pgrec.acc");
    auto amqp = AmqpUrl::Parse(broker_.amqp_url);
    ASSERT_OK(amqp);
    amqp_ = *amqp;
    // The queues as payment_service and accounting_service declare them,
    // bound to their exchanges: what recovery re-publishes lands here.
    AmqpPublisher payments(amqp_, Topology{{pay_queue_}, "", kPaymentsExchange}, "pgrec-payments");
    ASSERT_OK(payments.Connect());
    AmqpPublisher replies(amqp_, Topology{{acc_queue_}, "", kRepliesExchange}, "pgrec-replies");
    ASSERT_OK(replies.Connect());
    consumer_ = std::make_unique<AmqpConsumer>(amqp_, Topology{{pay_queue_}, "", kPaymentsExchange},
                                               "pgrec-test", pay_queue_, 50);
    ASSERT_OK(consumer_->Connect());
  }
  void TearDown() override { consumer_.reset(); }

  // What payment_service does on start: the outbox tables, then its own.
  void CreateSchema() {
    auto session = PgSession::Open(conninfo_);
    ASSERT_OK(session);
    ASSERT_OK(UpgradePgSchema(**session, PgOutboxSchema()));
  }

  // A payment event written `age_ms` ago by the library's PgOutbox, with
  // `max_attempts` attempts: due long since, its first publish lost.
  void Write(const std::string& id, int64_t age_ms, int max_attempts) {
    auto session = PgSession::Open(conninfo_);
    ASSERT_OK(session);
    ManualClock clock(absl::ToUnixMillis(absl::Now()) - age_ms);
    RetryPolicy retry;
    retry.base_delay = absl::Seconds(1);
    retry.max_attempts = max_attempts;
    PgOutbox outbox(**session, clock, retry);
    MessageSpec spec = MessageSpec::Of("PaymentCreated", "pay-" + id, "body-" + id);
    spec.message_id = id;
    spec.topic = pay_queue_;
    spec.reply_to = acc_queue_;
    ASSERT_OK(outbox.Write(spec, [](PgConnection&) { return absl::OkStatus(); }));
  }

  std::string Status(const std::string& id) {
    auto conn = PgConnection::Open(conninfo_);
    EXPECT_OK(conn);
    if (!conn.ok()) return "";
    auto r = (*conn)->Query("SELECT status FROM outbox WHERE message_id = $1", {id});
    EXPECT_OK(r);
    return r.ok() && r->rows() == 1 ? std::string(r->Get(0, 0)) : "";
  }
  int64_t Attempts(const std::string& id) {
    auto conn = PgConnection::Open(conninfo_);
    EXPECT_OK(conn);
    if (!conn.ok()) return -1;
    auto r = (*conn)->Query("SELECT attempts FROM outbox WHERE message_id = $1", {id});
    int64_t n = -1;
    if (r.ok() && r->rows() == 1) EXPECT_TRUE(absl::SimpleAtoi(r->Get(0, 0), &n));
    return n;
  }

  // Message ids taken from the pay queue so far (each copy once).
  std::multiset<std::string> Drain() {
    auto got = consumer_->Next(100, absl::Milliseconds(200));
    if (got.ok()) {
      for (const Delivery& d : *got) {
        received_.insert(d.message_id);
        EXPECT_OK(consumer_->Ack(d.delivery_tag, false));
      }
    }
    return received_;
  }

  std::map<std::string, std::string> Env(const std::string& instance, const std::string& db) {
    return {{"AMQP_URL", broker_.amqp_url},     {"PAY_QUEUE", pay_queue_},
            {"ACC_QUEUE", acc_queue_},          {"PAYMENT_DB", db},
            {"PAYMENT_DB_WAIT", "30s"},         {"ALLOW_UNSIGNED_MESSAGES", "true"},
            {"RECOVERY_INSTANCE_ID", instance}, {"RECOVERY_LISTEN", "127.0.0.1:0"},
            {"RECOVERY_IDLE_SLEEP", "100ms"},   {"RETRY_BASE_DELAY", "1h"},
            {"RETRY_MAX_DELAY", "1h"}};
  }

  // Starts recovery_service; its port, 0 when it did not start.
  int Start(Process& p, const std::string& instance, const std::string& db,
            const std::map<std::string, std::string>& extra_env = {}) {
    auto env = Env(instance, db);
    for (const auto& [k, v] : extra_env) env[k] = v;
    p.Start(BinaryPath("recovery_service"), {}, env,
            absl::StrCat(dir_.path(), "/", instance, ".log"));
    std::string log;
    PollUntil(
        [&] {
          log = p.Log();
          return log.find("recovery_service_started") != std::string::npos || !p.Running();
        },
        absl::Seconds(60), absl::Milliseconds(50));
    int port = 0;
    if (!absl::SimpleAtoi(LogField(log, "recovery_service_started", "port"), &port)) {
      ADD_FAILURE() << "recovery_service did not start; log:\n" << log;
    }
    return port;
  }

  static std::unique_ptr<::ops::v1::OutboxOps::Stub> Ops(int port) {
    return ::ops::v1::OutboxOps::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  }

  TempDir dir_{"pg_recovery_service"};
  std::string conninfo_;
  Broker broker_;
  AmqpUrl amqp_;
  std::string pay_queue_;
  std::string acc_queue_;
  std::unique_ptr<AmqpConsumer> consumer_;
  std::multiset<std::string> received_;
};

// Due SENDING rows are re-published to their queue, rows whose attempts are
// spent become FAILED; the ops API lists them, re-drives one (audited, in
// its history), and outboxctl reads the same. The connection string's
// password (here in the URI) is in no log line.
TEST_F(PgRecoveryServiceTest, RepublishesFailsAndServesTheOpsApi) {
  CreateSchema();
  Write("due-1", kHour, 5);
  Write("due-2", kHour, 5);
  Write("spent", kHour, 1);  // its one attempt was the lost publish

  const std::string password = PgNodePassword(kServer->servers().primary());
  ASSERT_FALSE(password.empty());
  std::string with_password = conninfo_;
  const size_t user = with_password.find("outbox@");
  ASSERT_NE(user, std::string::npos) << with_password;
  with_password.replace(user, 7, absl::StrCat("outbox:", PercentEncoded(password), "@"));

  Process p;
  const int metrics_port = ClosedLocalPort();
  ASSERT_NE(metrics_port, 0);
  const int port = Start(p, "pg-recovery-1", with_password,
                         {{"RECOVERY_METRICS_LISTEN", absl::StrCat("127.0.0.1:", metrics_port)}});
  ASSERT_NE(port, 0);

  ASSERT_TRUE(PollUntil(
      [&] {
        auto got = Drain();
        return got.count("due-1") == 1 && got.count("due-2") == 1;
      },
      absl::Seconds(30)))
      << p.Log();
  ASSERT_TRUE(PollUntil([&] { return Status("spent") == "FAILED"; }, absl::Seconds(30))) << p.Log();
  EXPECT_EQ(Status("due-1"), "SENDING");
  EXPECT_EQ(Attempts("due-1"), 2);
  EXPECT_EQ(Drain().count("spent"), 0u);

  auto ops = Ops(port);
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineIn(absl::Seconds(10)));
    ::ops::v1::ListMessagesRequest req;
    req.set_status(::ops::v1::FAILED);
    ::ops::v1::ListMessagesResponse resp;
    ASSERT_TRUE(ops->ListMessages(&ctx, req, &resp).ok());
    ASSERT_EQ(resp.messages_size(), 1);
    EXPECT_EQ(resp.messages(0).message_id(), "spent");
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineIn(absl::Seconds(10)));
    ::ops::v1::RedriveMessageRequest req;
    req.set_message_id("spent");
    req.set_reason("the consumer is fixed");
    ::ops::v1::OutboxMessage row;
    const grpc::Status s = ops->RedriveMessage(&ctx, req, &row);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(row.status(), ::ops::v1::SENDING);
  }
  // Re-driven, it is due now: re-published again.
  ASSERT_TRUE(PollUntil([&] { return Drain().count("spent") == 1; }, absl::Seconds(30))) << p.Log();
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineIn(absl::Seconds(10)));
    ::ops::v1::GetHistoryRequest req;
    req.set_id("pay-spent");  // by business key
    ::ops::v1::History history;
    ASSERT_TRUE(ops->GetHistory(&ctx, req, &history).ok());
    EXPECT_EQ(history.message().message_id(), "spent");
    std::vector<std::string> events;
    for (const auto& e : history.events()) events.push_back(e.event());
    EXPECT_THAT(events, ::testing::ElementsAre("failed", "redriven", "republished"));
  }
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineIn(absl::Seconds(10)));
    ::ops::v1::ListAuditResponse audit;
    ASSERT_TRUE(ops->ListAudit(&ctx, {}, &audit).ok());
    ASSERT_GE(audit.records_size(), 1);
    EXPECT_EQ(audit.records(0).action(), "redrive_message");
    EXPECT_EQ(audit.records(0).target(), "spent");
    EXPECT_EQ(audit.records(0).rows(), 1);
    EXPECT_EQ(audit.records(0).reason(), "the consumer is fixed");
  }

  // The loop's metrics and the rows' gauges; no SQLite file, so none of its.
  auto metrics =
      HttpGet(absl::StrCat("http://127.0.0.1:", metrics_port, "/metrics"), absl::Seconds(5));
  ASSERT_OK(metrics);
  EXPECT_THAT(metrics->body, HasSubstr("outbox_rows{status=\"SENDING\"} 3")) << metrics->body;
  EXPECT_THAT(metrics->body, HasSubstr("outbox_oldest_sending_age_seconds")) << metrics->body;
  EXPECT_THAT(metrics->body, HasSubstr("outbox_recovery_round_seconds")) << metrics->body;
  EXPECT_THAT(metrics->body, Not(HasSubstr("outbox_sqlite_"))) << metrics->body;

  // outboxctl over the same API.
  const std::map<std::string, std::string> ctl_env = {
      {"RECOVERY_ADDR", absl::StrCat("127.0.0.1:", port)}, {"OUTBOXCTL_TIMEOUT", "10s"}};
  CommandResult r = RunToCompletion(BinaryPath("outboxctl"), {"history", "spent"}, ctl_env,
                                    dir_.path() + "/outboxctl.history");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("redriven")) << r.out;
  r = RunToCompletion(BinaryPath("outboxctl"), {"stats", "--json"}, ctl_env,
                      dir_.path() + "/outboxctl.stats");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"lease_holder\":\"pg-recovery-1\"")) << r.out;

  EXPECT_EQ(p.Terminate(), 0);
  const std::string log = p.Log();
  EXPECT_THAT(log, HasSubstr("recovery_service_stopped"));
  EXPECT_THAT(log, Not(HasSubstr(password)));
  EXPECT_THAT(log, Not(HasSubstr(PercentEncoded(password))));
}

// Two instances on one database: one holds the lease and claims; every due
// row is re-published once, none twice.
TEST_F(PgRecoveryServiceTest, TwoInstancesShareTheDueRows) {
  CreateSchema();
  constexpr int kRows = 40;
  for (int i = 0; i < kRows; ++i) Write(absl::StrCat("row-", i), kHour, 5);
  Process a;
  Process b;
  ASSERT_NE(Start(a, "pg-recovery-a", conninfo_), 0);
  ASSERT_NE(Start(b, "pg-recovery-b", conninfo_), 0);
  ASSERT_TRUE(PollUntil([&] { return Drain().size() >= kRows; }, absl::Seconds(60)));
  for (int i = 0; i < kRows; ++i) {
    const std::string id = absl::StrCat("row-", i);
    EXPECT_EQ(received_.count(id), 1u) << id;
    EXPECT_EQ(Attempts(id), 2) << id;
  }
  EXPECT_EQ(a.Terminate(), 0);
  EXPECT_EQ(b.Terminate(), 0);
}

// A database that cannot be used stops the start: one clear line, a
// non-zero exit, and never the password.
TEST_F(PgRecoveryServiceTest, AnUnusableDatabaseStopsTheStart) {
  const std::string secret = "not-the-password-4711";
  auto start = [&](const std::string& name, const std::string& db, const std::string& wait) {
    Process p;
    auto env = Env(name, db);
    env["PAYMENT_DB_WAIT"] = wait;
    p.Start(BinaryPath("recovery_service"), {}, env, absl::StrCat(dir_.path(), "/", name, ".log"));
    const int code = p.WaitExit(absl::Seconds(60));
    std::cout << name << ": exit " << code << "\n" << p.Log();
    EXPECT_NE(code, 0) << name;
    EXPECT_THAT(p.Log(), Not(HasSubstr(secret))) << name;
    return p.Log();
  };
  // Wrong password (in the URI; the passfile not read then).
  std::string wrong = conninfo_;
  wrong.replace(wrong.find("outbox@"), 7, absl::StrCat("outbox:", secret, "@"));
  EXPECT_THAT(start("wrong-password", wrong, "30s"), HasSubstr("UNAUTHENTICATED"));
  // Nothing listening.
  std::string closed =
      absl::StrCat("postgresql://outbox:", secret, "@127.0.0.1:1/outbox?connect_timeout=5");
  EXPECT_THAT(start("unreachable", closed, "30s"), HasSubstr("cannot connect"));
  // The database is there, payment_service's schema not, after the wait.
  const std::string log = start("no-schema", conninfo_, "1s");
  EXPECT_THAT(log, HasSubstr("waiting_for_payment_db"));
  EXPECT_THAT(log, HasSubstr("after waiting 1s"));
  EXPECT_THAT(log, HasSubstr("holds no schema outbox"));

  // --help shows a password given in PAYMENT_DB's URI as ***.
  CommandResult help = RunToCompletion(BinaryPath("recovery_service"), {"--help"},
                                       {{"PAYMENT_DB", wrong}}, dir_.path() + "/help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("outbox:***@"));
  EXPECT_THAT(help.out + help.err, Not(HasSubstr(secret)));
}

}  // namespace
}  // namespace outbox::testing
