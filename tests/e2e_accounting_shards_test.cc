// Accounting shards (docs/deployment.md, Accounting shards): with ACCOUNTING_SHARDS=2
// payment events go through the consistent-hash exchange to PAY-0 and PAY-1
// by payment id, every copy of a payment to the same shard, and a dead letter
// goes back to the shard it came from. Killing one shard under load loses
// nothing and books nothing twice, across both accounting.db files; going
// from 1 to 2 shards with scripts/reshard_accounting.sh books nothing twice.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/channel.h"
#include "service_kit/topology.h"
#include "shared/amqp/internal/amqp_client.h"
#include "shared/testing/status_matchers.h"
#include "tests/support/load.h"

namespace outbox::testing {
namespace {

constexpr int kShards = 2;

std::string Shard(const ServiceSet& services, int k) {
  return absl::StrCat(services.pay_queue(), "-", k);
}

std::unique_ptr<AmqpConnection> Admin(const ServiceSet& services) {
  auto url = AmqpUrl::Parse(services.broker().amqp_url);
  EXPECT_OK(url);
  auto c = AmqpConnection::Connect(*url, "shards-test-admin");
  EXPECT_OK(c);
  if (!c.ok()) return nullptr;
  EXPECT_OK((*c)->EnableConfirms());
  return *std::move(c);
}

// Takes (and acks) everything ready in `queue`: the shard keys, one per message.
std::vector<std::string> Drain(AmqpConnection& c, const std::string& queue) {
  std::vector<std::string> keys;
  for (;;) {
    auto d = c.Get(queue);
    EXPECT_OK(d);
    if (!d.ok() || d->delivery_tag == 0) return keys;
    keys.push_back(d->shard_key);
    EXPECT_OK(c.Ack(d->delivery_tag, false));
  }
}

// The vouchers over every accounting shard: per shard, per payment id, and
// how many payments were booked more than once.
struct Bookings {
  std::vector<size_t> per_shard;
  std::map<std::string, int> by_payment;
  int twice = 0;
};
Bookings BookingsOf(ServiceSet& services, int shards) {
  Bookings b;
  for (int k = 0; k < shards; ++k) {
    const auto vouchers = services.ShardVouchers(k);
    b.per_shard.push_back(vouchers.size());
    for (const auto& v : vouchers) ++b.by_payment[v.payment_id()];
  }
  for (const auto& [id, n] : b.by_payment) b.twice += n > 1;
  return b;
}

TEST(AccountingShardsTest, EveryCopyOfAPaymentLandsOnOneShardAndDeadLettersGoBack) {
  ServiceSet services(Env{{"ACCOUNTING_SHARDS", absl::StrCat(kShards)}});
  services.StartPayment();  // the writer declares the shards and the hash exchange
  ServiceSet::Recovery& recovery = services.StartRecovery("r");
  auto admin = Admin(services);
  ASSERT_NE(admin, nullptr);
  // Payment declares when it first publishes: one payment, taken away again.
  CreatePayments(services, "declare-", 1);
  ASSERT_TRUE(PollUntil(
      [&] {
        int64_t ready = 0;
        for (int k = 0; k < kShards; ++k) {
          auto n = admin->MessageCount(Shard(services, k));
          ready += n.ok() ? *n : 0;
        }
        return ready == 1;
      },
      absl::Seconds(30)));
  for (int k = 0; k < kShards; ++k) Drain(*admin, Shard(services, k));

  // Two copies of each of 50 payments, published the way payment and
  // recovery do: to outbox.payments with PAY_QUEUE as the routing key.
  constexpr int kPayments = 50;
  std::vector<OutgoingMessage> copies;
  for (int copy = 0; copy < 2; ++copy) {
    for (int i = 0; i < kPayments; ++i) {
      OutgoingMessage m;
      m.topic = services.pay_queue();
      m.message_id = absl::StrCat("m-", i);
      m.body = "x";
      m.shard_key = absl::StrCat("pay-", i);
      copies.push_back(m);
    }
  }
  admin->PublishThrough(kPaymentsExchange);
  auto confirmed = admin->PublishConfirmed(copies, absl::Seconds(30));
  ASSERT_OK(confirmed);
  for (bool ok : *confirmed) ASSERT_TRUE(ok);

  std::map<std::string, std::map<int, int>> seen;  // shard key -> shard -> copies
  for (int k = 0; k < kShards; ++k) {
    const std::vector<std::string> keys = Drain(*admin, Shard(services, k));
    EXPECT_FALSE(keys.empty()) << "shard " << k << " got nothing: the hash does not spread";
    for (const std::string& key : keys) ++seen[key][k];
  }
  ASSERT_EQ(seen.size(), static_cast<size_t>(kPayments));
  for (const auto& [key, shards] : seen) {
    ASSERT_EQ(shards.size(), 1u) << key << " reached more than one shard";
    EXPECT_EQ(shards.begin()->second, 2) << key;
  }
  auto plain = admin->MessageCount(services.pay_queue());
  EXPECT_TRUE(absl::IsNotFound(plain.status())) << "no unsharded PAY_QUEUE with M=2";

  // 20 dead letters of shard 1 with keys that hash to either shard: the
  // re-drive sends them all back to shard 1, by its name.
  constexpr int kDead = 20;
  std::vector<OutgoingMessage> dead;
  for (int i = 0; i < kDead; ++i) {
    OutgoingMessage m;
    m.topic = Shard(services, 1) + ".DLQ";
    m.message_id = absl::StrCat("dead-", i);
    m.body = "x";
    m.shard_key = absl::StrCat("pay-", i);
    dead.push_back(m);
  }
  admin->PublishThrough("");
  confirmed = admin->PublishConfirmed(dead, absl::Seconds(30));
  ASSERT_OK(confirmed);
  grpc::ClientContext ctx;
  ::ops::v1::RedriveDeadLettersRequest req;
  req.set_queue(Shard(services, 1));
  ::ops::v1::RedriveDeadLettersResponse resp;
  const grpc::Status s = recovery.ops->RedriveDeadLetters(&ctx, req, &resp);
  ASSERT_OK(client::FromGrpc(s, "RedriveDeadLetters"));
  EXPECT_EQ(resp.count(), kDead);
  const std::vector<std::string> back = Drain(*admin, Shard(services, 1));
  EXPECT_EQ(back.size(), static_cast<size_t>(kDead));
  EXPECT_TRUE(Drain(*admin, Shard(services, 0)).empty());
  for (const std::string& key : back) EXPECT_EQ(key.rfind("pay-", 0), 0u) << "header kept";
  // It can cause bookings: it is in the audit trail like every other action.
  grpc::ClientContext audit_ctx;
  ::ops::v1::ListAuditRequest audit_req;
  ::ops::v1::ListAuditResponse audit;
  ASSERT_OK(client::FromGrpc(recovery.ops->ListAudit(&audit_ctx, audit_req, &audit), "ListAudit"));
  ASSERT_GE(audit.records_size(), 1);
  EXPECT_EQ(audit.records(0).action(), "redrive_dead_letters");
  EXPECT_EQ(audit.records(0).target(), Shard(services, 1));
  EXPECT_EQ(audit.records(0).rows(), kDead);
  EXPECT_EQ(audit.records(0).outcome(), "ok");
}

TEST(AccountingShardsTest, KillOneShardUnderLoad) {
  constexpr int kPayments = 400;
  ServiceSet services(Env{{"ACCOUNTING_SHARDS", absl::StrCat(kShards)},
                          {"RECOVERY_BASE_DELAY", "500ms"},
                          {"RECOVERY_MAX_DELAY", "2s"},
                          {"RECOVERY_MAX_ATTEMPTS", "100"},
                          {"RECOVERY_IDLE_SLEEP", "200ms"},
                          {"RECOVERY_LEASE_TTL", "2s"}});
  for (int k = 0; k < kShards; ++k) services.StartAccountingShard(k);
  services.StartPayment();
  services.StartRecovery("r");
  PaymentLoad load(services, "shard-kill-", kPayments, 4);

  ASSERT_TRUE(PollUntil([&] { return load.created() >= kPayments / 4; }, absl::Seconds(120)));
  Process& victim = services.accounting_shard(1).process;
  victim.Kill();  // SIGKILL: mid-batch, with deliveries unacked
  EXPECT_FALSE(victim.Running());
  ASSERT_TRUE(PollUntil([&] { return load.created() >= kPayments / 2 || load.done(); },
                        absl::Seconds(120)));
  const int created_while_down = load.created();
  services.StartAccountingShard(1);
  load.Join();
  ASSERT_EQ(load.created(), kPayments);

  const int sent = WaitAllSent(services, kPayments, absl::Seconds(120));
  const Bookings b = BookingsOf(services, kShards);
  const std::vector<size_t>& per_shard = b.per_shard;
  const auto& booked = b.by_payment;
  const int twice = b.twice;
  const CheckResult check = RunChecker(services);
  std::cout << "killed shard 1 after " << kPayments / 4 << " payments, restarted after "
            << created_while_down << "; SENT=" << sent << " vouchers shard0=" << per_shard[0]
            << " shard1=" << per_shard[1] << " booked twice=" << twice << "; outbox_check exit "
            << check.exit_code << "\n";
  EXPECT_EQ(sent, kPayments);
  EXPECT_EQ(booked.size(), static_cast<size_t>(kPayments));
  EXPECT_EQ(twice, 0);
  EXPECT_GT(per_shard[0], 0u);
  EXPECT_GT(per_shard[1], 0u);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find("\"ok\": true"), std::string::npos) << check.output;
}

// scripts/reshard_accounting.sh STEP... against the test broker; its exit code.
int Reshard(const ServiceSet& services, const std::vector<std::string>& step) {
  Process p;
  static int runs = 0;
  const std::string log = absl::StrCat(services.dir(), "/reshard_", ++runs, ".log");
  p.Start(OUTBOX_SOURCE_DIR "/scripts/reshard_accounting.sh", step,
          {{"BROKER_DIR", services.broker().dir},
           {"PAY_QUEUE", services.pay_queue()},
           {"ACC_QUEUE", services.acc_queue()},
           {"RESHARD_TIMEOUT", "120"}},
          log);
  const int rc = p.WaitExit(absl::Seconds(180));
  std::cout << p.Log();
  return rc;
}

// M = 1 -> 2 under a client load that keeps retrying through the stop: the
// procedure of docs/deployment.md, Accounting shards, with the script's three steps.
TEST(AccountingShardsTest, ReshardOneToTwoUnderLoad) {
  constexpr int kPayments = 600;
  ServiceSet services(Env{{"RECOVERY_BASE_DELAY", "500ms"},
                          {"RECOVERY_MAX_DELAY", "2s"},
                          {"RECOVERY_MAX_ATTEMPTS", "100"},
                          {"RECOVERY_IDLE_SLEEP", "200ms"},
                          {"RECOVERY_LEASE_TTL", "2s"}});
  const Env one = {{"ACCOUNTING_SHARDS", "1"}};
  const Env two = {{"ACCOUNTING_SHARDS", "2"}};
  services.StartAccountingShard(0, one);
  services.StartPayment(one);
  services.StartRecovery("r", one);
  // About 20 payments/s for 30 s, so that most of them come after the stop
  // however slowly the steps below run on a busy machine.
  PaymentLoad load(services, "reshard-", kPayments, 4, absl::Milliseconds(200));
  ASSERT_TRUE(PollUntil([&] { return load.created() >= kPayments / 12; }, absl::Seconds(120)));

  // 1. Publishers stop; the script refuses while payment still consumes acks.
  services.recovery("r").process.Terminate();
  EXPECT_NE(Reshard(services, {"switch", "1", "2"}), 0) << "switch before payment stopped";
  services.payment().Terminate();
  const int created_before = load.created();
  ASSERT_LT(created_before, kPayments) << "the load ended before the reshard";
  ASSERT_EQ(Reshard(services, {"drain", "1"}), 0);
  // 2. Accounting stops; the unsharded queue goes.
  services.accounting_shard(0).process.Terminate();
  ASSERT_EQ(Reshard(services, {"switch", "1", "2"}), 0);
  // 3. Two shards and payment with M = 2; acknowledgements applied first.
  services.StartAccountingShard(0, two);
  services.StartAccountingShard(1, two);
  services.StartPayment(two);
  ASSERT_EQ(Reshard(services, {"settle"}), 0);
  // 4. Recovery.
  services.StartRecovery("r", two);
  load.Join();
  ASSERT_EQ(load.created(), kPayments);

  const int sent = WaitAllSent(services, kPayments, absl::Seconds(120));
  const Bookings b = BookingsOf(services, 2);
  const std::vector<size_t>& per_shard = b.per_shard;
  const auto& booked = b.by_payment;
  const int twice = b.twice;
  const CheckResult check = RunChecker(services);
  std::cout << "resharded 1 -> 2 after " << created_before << " payments; SENT=" << sent
            << " vouchers shard0=" << per_shard[0] << " shard1=" << per_shard[1]
            << " booked twice=" << twice << "; outbox_check exit " << check.exit_code << "\n";
  EXPECT_EQ(sent, kPayments);
  EXPECT_EQ(booked.size(), static_cast<size_t>(kPayments));
  EXPECT_EQ(twice, 0);
  EXPECT_GT(per_shard[1], 0u) << "shard 1 booked nothing after the switch";
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

}  // namespace
}  // namespace outbox::testing
