// Per-service broker users (scripts/rabbitmq_node.sh) on the real node: each
// service on its own user moves payments, replies and dead letters as
// before, and the broker refuses every write a user has no business doing,
// with nothing arriving in the queue (docs/security.md, broker users).
#include <gtest/gtest.h>

#include <fstream>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/channel.h"
#include "service_kit/topology.h"
#include "shared/amqp/internal/amqp_client.h"
#include "shared/testing/status_matchers.h"
#include "tests/support/load.h"
#include "tests/support/services.h"

namespace outbox::testing {
namespace {

constexpr absl::Duration kWait = absl::Seconds(30);

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A connection as `user` (outbox-payment, ...), or as the admin user when empty.
std::unique_ptr<AmqpConnection> ConnectAs(const Broker& broker, const std::string& user) {
  auto url = AmqpUrl::Parse(user.empty() ? broker.amqp_url : ServiceBrokerUser(broker, user).url);
  EXPECT_OK(url);
  if (!user.empty()) {
    url->password = ReadAll(ServiceBrokerUser(broker, user).password_file);
    absl::StripAsciiWhitespace(&url->password);
  }
  auto conn = AmqpConnection::Connect(*url, absl::StrCat("test-", user.empty() ? "admin" : user));
  EXPECT_OK(conn);
  if (!conn.ok()) return nullptr;
  EXPECT_OK((*conn)->EnableConfirms());
  return std::move(conn).value();
}

// One message through `exchange` to `queue`, as `user`: OK once confirmed,
// else the broker's refusal (the channel closes, so a fresh connection each).
absl::Status PublishAs(const Broker& broker, const std::string& user, const std::string& exchange,
                       const std::string& queue, const std::string& shard_key = "") {
  auto conn = ConnectAs(broker, user);
  if (conn == nullptr) return absl::UnavailableError("no connection");
  conn->PublishThrough(exchange);
  OutgoingMessage m{queue, "forged-1", "forged", "", "payment"};
  m.shard_key = shard_key;
  auto confirmed = conn->PublishConfirmed({m}, absl::Seconds(10));
  if (!confirmed.ok()) return confirmed.status();
  return (*confirmed)[0] ? absl::OkStatus() : absl::InternalError("not confirmed");
}

uint32_t Ready(const Broker& broker, const std::string& queue) {
  auto conn = ConnectAs(broker, "");
  auto n = conn->MessageCount(queue);
  EXPECT_OK(n);
  return n.ok() ? *n : 0;
}

// Not one code: a channel the broker closes with 403 is PERMISSION_DENIED from
// a publish's confirms, a declare, a bind or a delete, but UNAVAILABLE from
// AmqpConnection::Get (basic.get does not map the broker's reply code).
void ExpectRefused(const absl::Status& s, const std::string& what) {
  EXPECT_THAT(s, ::testing::Not(IsOk())) << what << " was allowed";
  EXPECT_TRUE(absl::StrContains(s.message(), "403 ACCESS_REFUSED")) << what << ": " << s;
}

TEST(BrokerUsersTest, EachServiceOnItsOwnUserMovesPaymentsRepliesAndDeadLetters) {
  ServiceSet services;
  services.StartAll();
  ServiceSet::Recovery& recovery = services.StartRecovery("r1");
  EXPECT_TRUE(
      absl::StartsWith(LogField(services.payment().Log(), "payment_service_started", "amqp"),
                       "amqp://outbox-payment:***@"));
  EXPECT_TRUE(
      absl::StartsWith(LogField(services.accounting().Log(), "accounting_service_started", "amqp"),
                       "amqp://outbox-accounting:***@"));

  constexpr int kPayments = 20;
  CreatePayments(services, "users-", kPayments);
  EXPECT_EQ(WaitAllSent(services, kPayments, kWait), kPayments);
  EXPECT_EQ(services.AllVouchers().size(), static_cast<size_t>(kPayments));

  // A poison message on each side is dead-lettered by its consumer, listed
  // and re-driven by recovery through the exchange that feeds the queue.
  const Broker& broker = services.broker();
  ASSERT_OK(PublishAs(broker, "", "", services.pay_queue()));
  ASSERT_OK(PublishAs(broker, "", "", services.acc_queue()));
  for (const std::string& queue : {services.pay_queue(), services.acc_queue()}) {
    const std::string dlq = Topology::DeadLetterQueue(queue);
    ASSERT_TRUE(PollUntil([&] { return Ready(broker, dlq) == 1; }, kWait)) << dlq;
    grpc::ClientContext list_ctx;
    ::ops::v1::ListDeadLettersRequest list;
    list.set_queue(queue);
    ::ops::v1::ListDeadLettersResponse listed;
    ASSERT_OK(client::FromGrpc(recovery.ops->ListDeadLetters(&list_ctx, list, &listed),
                               "ListDeadLetters"));
    EXPECT_EQ(listed.total(), 1);
    grpc::ClientContext redrive_ctx;
    ::ops::v1::RedriveDeadLettersRequest redrive;
    redrive.set_queue(queue);
    ::ops::v1::RedriveDeadLettersResponse redriven;
    const grpc::Status s = recovery.ops->RedriveDeadLetters(&redrive_ctx, redrive, &redriven);
    ASSERT_OK(client::FromGrpc(s, "RedriveDeadLetters"));
    EXPECT_EQ(redriven.count(), 1);
    // Still poison: its consumer parks it again.
    ASSERT_TRUE(PollUntil([&] { return Ready(broker, dlq) == 1; }, kWait)) << dlq;
  }
  const std::string logs =
      services.payment().Log() + services.accounting().Log() + recovery.process.Log();
  for (const char* user : {"outbox-payment", "outbox-accounting", "outbox-recovery"}) {
    const std::string password = ReadAll(ServiceBrokerUser(broker, user).password_file);
    EXPECT_FALSE(absl::StrContains(logs, absl::StripAsciiWhitespace(password))) << user;
  }
  EXPECT_FALSE(absl::StrContains(logs, "ACCESS_REFUSED")) << logs;
}

TEST(BrokerUsersTest, TheBrokerRefusesWritesOutsideAUsersRoleAndNothingArrives) {
  const Broker broker = TestBroker();
  const std::string pay = UniqueName("PAY");
  const std::string acc = UniqueName("ACC");
  // The topology as the writers declare it, and no consumer: what a publish
  // delivers stays countable.
  auto payment = ConnectAs(broker, "outbox-payment");
  auto accounting = ConnectAs(broker, "outbox-accounting");
  ASSERT_OK(payment->DeclareQueue(pay, "", kPaymentsExchange));
  ASSERT_OK(accounting->DeclareQueue(acc, "", kRepliesExchange));

  // Payment events: only payment and recovery write them.
  ExpectRefused(PublishAs(broker, "outbox-accounting", kPaymentsExchange, pay),
                "accounting publishing a payment event");
  ExpectRefused(PublishAs(broker, "outbox-accounting", "", pay),
                "accounting publishing to PAY_QUEUE through the default exchange");
  ExpectRefused(PublishAs(broker, "outbox-accounting", DeadLetterExchangeOf(kPaymentsExchange),
                          Topology::DeadLetterQueue(pay)),
                "accounting writing PAY_QUEUE's dead letters");
  EXPECT_EQ(Ready(broker, pay), 0u);
  EXPECT_EQ(Ready(broker, Topology::DeadLetterQueue(pay)), 0u);
  // Replies: only accounting and recovery write them.
  ExpectRefused(PublishAs(broker, "outbox-payment", kRepliesExchange, acc),
                "payment publishing a reply");
  ExpectRefused(PublishAs(broker, "outbox-payment", "", acc),
                "payment publishing to ACC_QUEUE through the default exchange");
  ExpectRefused(PublishAs(broker, "outbox-recovery", "", pay),
                "recovery publishing through the default exchange");
  EXPECT_EQ(Ready(broker, acc), 0u);

  // Binding is no way round: a user may bind only queues it may feed.
  ExpectRefused(ConnectAs(broker, "outbox-accounting")->Bind(pay, kRepliesExchange),
                "accounting binding PAY_QUEUE to its own exchange");
  ExpectRefused(ConnectAs(broker, "outbox-payment")->Bind(acc, kPaymentsExchange),
                "payment binding ACC_QUEUE to its own exchange");
  // Nor redeclaring the other side's queue, reading it, or deleting it.
  ExpectRefused(ConnectAs(broker, "outbox-accounting")->DeclareQueue(pay, "", kPaymentsExchange),
                "accounting declaring PAY_QUEUE");
  ExpectRefused(ConnectAs(broker, "outbox-recovery")->Get(pay).status(),
                "recovery reading PAY_QUEUE");
  ExpectRefused(ConnectAs(broker, "outbox-accounting")->DeleteQueue(pay),
                "accounting deleting PAY_QUEUE");

  // The same checks let the rightful writers through, so they can fail.
  EXPECT_OK(PublishAs(broker, "outbox-payment", kPaymentsExchange, pay));
  EXPECT_OK(PublishAs(broker, "outbox-recovery", kPaymentsExchange, pay));
  EXPECT_OK(PublishAs(broker, "outbox-accounting", kRepliesExchange, acc));
  EXPECT_OK(PublishAs(broker, "outbox-recovery", kRepliesExchange, acc));
  EXPECT_EQ(Ready(broker, pay), 2u);
  EXPECT_EQ(Ready(broker, acc), 2u);

  auto admin = ConnectAs(broker, "");
  for (const std::string& q : {pay, acc}) {
    EXPECT_OK(admin->DeleteQueue(q));
    EXPECT_OK(admin->DeleteQueue(Topology::DeadLetterQueue(q)));
  }
}

// Accounting shards (docs/deployment.md, Accounting shards): payment alone declares and
// binds the consistent-hash exchange; nobody else writes it or binds to it,
// and recovery reaches the shards through outbox.payments as before.
TEST(BrokerUsersTest, AccountingShardsKeepTheRoles) {
  const Broker broker = TestBroker();
  const std::string pay = UniqueName("PAY");
  const std::string acc = UniqueName("ACC");
  const std::string hash = pay + ".hash";  // PaymentShardsExchange
  Topology shards{{pay + "-0", pay + "-1"}, "", kPaymentsExchange};
  shards.hash_exchange = hash;
  shards.hash_routing_key = pay;
  ExpectRefused(ConnectAs(broker, "outbox-accounting")->DeclareTopology(shards),
                "accounting declaring the shards");
  ASSERT_OK(ConnectAs(broker, "outbox-payment")->DeclareTopology(shards));
  ASSERT_OK(ConnectAs(broker, "outbox-accounting")->DeclareQueue(acc, "", kRepliesExchange));

  ExpectRefused(PublishAs(broker, "outbox-accounting", hash, pay, "p-1"),
                "accounting publishing to the hash exchange");
  ExpectRefused(PublishAs(broker, "outbox-recovery", hash, pay, "p-1"),
                "recovery publishing to the hash exchange directly");
  ExpectRefused(ConnectAs(broker, "outbox-accounting")->Bind(acc, hash, "1"),
                "accounting binding ACC_QUEUE to the hash exchange");
  ExpectRefused(ConnectAs(broker, "outbox-payment")->Bind(acc, hash, "1"),
                "payment binding ACC_QUEUE to the hash exchange");
  for (const std::string& q : shards.queues) EXPECT_EQ(Ready(broker, q), 0u) << q;

  // The rightful ways in: both writers through outbox.payments, one shard each.
  EXPECT_OK(PublishAs(broker, "outbox-payment", kPaymentsExchange, pay, "p-1"));
  EXPECT_OK(PublishAs(broker, "outbox-recovery", kPaymentsExchange, pay, "p-1"));
  const uint32_t first = Ready(broker, shards.queues[0]);
  EXPECT_EQ(first + Ready(broker, shards.queues[1]), 2u);
  EXPECT_TRUE(first == 0 || first == 2) << "two copies of one payment on two shards";

  auto admin = ConnectAs(broker, "");
  for (const std::string& q : {shards.queues[0], shards.queues[1], acc}) {
    EXPECT_OK(admin->DeleteQueue(q));
    EXPECT_OK(admin->DeleteQueue(Topology::DeadLetterQueue(q)));
  }
}

TEST(BrokerUsersTest, AnUnreadablePasswordFileStopsTheStartWithExit2) {
  ServiceSet services;
  Env env = services.ServiceEnv("outbox-accounting");
  env["AMQP_PASSWORD_FILE"] = services.dir() + "/missing.password";
  env["ACCOUNTING_LISTEN"] = "127.0.0.1:0";
  const CommandResult r =
      RunToCompletion(BinaryPath("accounting_service"), {}, env, services.dir() + "/bad_password");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.out + r.err, "amqp_password_file")) << r.out << r.err;
}

}  // namespace
}  // namespace outbox::testing
