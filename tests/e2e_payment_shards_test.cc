// Two payment shards (docs/deployment.md, Payment shards) on the shared test broker: each
// its own payment_service, payment.db, reply queue and recovery_service,
// sharing PAY_QUEUE and one accounting_service. Every payment lands on the
// shard its idempotency key hashes to and names it; a call for the other
// shard is answered with where to go and writes nothing; killing one shard
// under load (SIGKILL, restarted) loses and duplicates nothing.
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/channel.h"
#include "client/listing.h"
#include "client/request.h"
#include "client/sharded_payment_stub.h"
#include "service_kit/shard_of_payment.h"
#include "shared/testing/status_matchers.h"
#include "tests/support/load.h"

namespace outbox::testing {
namespace {

using ::payment::v1::CreatePaymentRequest;
using ::payment::v1::CreatePaymentResponse;

constexpr int kShards = 2;
constexpr char kShardHeader[] = "outbox-payment-shard";
constexpr char kShardAddressHeader[] = "outbox-payment-shard-address";

const Env kFastRetries = {{"RETRY_BASE_DELAY", "1s"},
                          {"RETRY_MAX_DELAY", "2s"},
                          {"RETRY_MAX_ATTEMPTS", "1000"},
                          {"RECOVERY_IDLE_SLEEP", "200ms"},
                          {"RECOVERY_LEASE_TTL", "2s"}};

std::string Trailing(const grpc::ClientContext& ctx, const std::string& key) {
  const auto& md = ctx.GetServerTrailingMetadata();
  auto it = md.find(key);
  return it == md.end() ? "" : std::string(it->second.data(), it->second.size());
}

// A key of `shard` (of kShards) with `prefix`.
std::string KeyOfShard(const std::string& prefix, int shard) {
  for (int i = 0;; ++i) {
    std::string key = absl::StrCat(prefix, i);
    if (ShardOfKey(key, kShards) == shard) return key;
  }
}

class PaymentShardsTest : public ::testing::Test {
 protected:
  PaymentShardsTest() : services_(kFastRetries) {}

  void SetUp() override {
    services_.UsePaymentShards(kShards);
    services_.StartAccounting();
    for (int k = 0; k < kShards; ++k) services_.StartPaymentShard(k);
    for (int k = 0; k < kShards; ++k) services_.StartShardRecovery(k, absl::StrCat("r", k));
  }

  // Every payment SENT with one voucher each, on the shard its key names,
  // and outbox_check clean for each shard with the shared accounting db.
  // Returns, per shard, how many payments its recovery re-published.
  std::map<int, int> ExpectAllDelivered(size_t payments) {
    EXPECT_EQ(WaitAllSent(services_, payments, absl::Seconds(90)), static_cast<int>(payments));
    std::map<int, int> per_shard;
    std::map<int, int> republished;  // by the shard's recovery
    std::set<std::string> ids;
    for (const auto& p : services_.AllPayments()) {
      const std::optional<int> shard = ShardOfPaymentId(p.payment_id());
      EXPECT_TRUE(shard.has_value()) << p.payment_id();
      if (!shard) continue;
      EXPECT_EQ(*shard, ShardOfKey(p.idempotency_key(), kShards)) << p.idempotency_key();
      ++per_shard[*shard];
      republished[*shard] += p.outbox().attempts() > 1;
      ids.insert(p.payment_id());
    }
    EXPECT_EQ(ids.size(), payments);
    for (int k = 0; k < kShards; ++k) EXPECT_GT(per_shard[k], 0) << "shard " << k << " unused";
    std::set<std::string> vouchered;
    int duplicates = 0;
    for (const auto& v : services_.AllVouchers()) {
      duplicates += !vouchered.insert(v.payment_id()).second;
      EXPECT_EQ(ids.count(v.payment_id()), 1u) << v.payment_id();
    }
    EXPECT_EQ(duplicates, 0);
    EXPECT_EQ(vouchered.size(), payments);
    for (int k = 0; k < kShards; ++k) {
      const CheckResult check = RunChecker(services_, k);
      EXPECT_EQ(check.exit_code, 0) << "shard " << k << ": " << check.output;
    }
    std::cout << "payments per shard: s0=" << per_shard[0] << " s1=" << per_shard[1]
              << "; re-published by recovery: s0=" << republished[0] << " s1=" << republished[1]
              << "; vouchers=" << vouchered.size() << std::endl;
    return republished;
  }

  ServiceSet services_;
};

TEST_F(PaymentShardsTest, EachPaymentLandsOnItsKeysShardAndTheOtherAnswersWhereToGo) {
  constexpr int kPayments = 200;
  PaymentLoad load(services_, "shards-", kPayments, 4);
  load.Join();
  ASSERT_EQ(load.created(), kPayments);

  auto shard0 = services_.PaymentShardStub(0);
  auto shard1 = services_.PaymentShardStub(1);

  // CreatePayment with shard 1's key on shard 0: where to go, nothing written.
  CreatePaymentRequest req = client::PaymentRequest("", 0, "e2e");
  req.set_idempotency_key(KeyOfShard("wrong-shard-", 1));
  {
    grpc::ClientContext ctx;
    CreatePaymentResponse resp;
    const grpc::Status s = shard0->CreatePayment(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
    EXPECT_TRUE(absl::StrContains(s.error_message(), services_.payment_shard_address(1)))
        << s.error_message();
    EXPECT_EQ(Trailing(ctx, kShardHeader), "1");
    EXPECT_EQ(Trailing(ctx, kShardAddressHeader), services_.payment_shard_address(1));
  }
  for (const auto& p : services_.AllPayments()) {
    EXPECT_NE(p.idempotency_key(), req.idempotency_key());
  }

  // The right shard creates it; a retry through the routing client replays it.
  std::string created_id;
  {
    grpc::ClientContext ctx;
    CreatePaymentResponse resp;
    ASSERT_OK(client::FromGrpc(shard1->CreatePayment(&ctx, req, &resp), "CreatePayment"));
    created_id = resp.payment().payment_id();
    EXPECT_EQ(ShardOfPaymentId(created_id), 1) << created_id;
    EXPECT_FALSE(resp.replayed());
  }
  {
    auto routed = services_.PaymentShardsStub();
    grpc::ClientContext ctx;
    CreatePaymentResponse resp;
    ASSERT_OK(client::FromGrpc(routed->CreatePayment(&ctx, req, &resp), "CreatePayment"));
    EXPECT_TRUE(resp.replayed());
    EXPECT_EQ(resp.payment().payment_id(), created_id);
  }

  // GetPayment of shard 1's payment on shard 0: where to go; on shard 1: found.
  ::payment::v1::GetPaymentRequest get;
  get.set_payment_id(created_id);
  {
    grpc::ClientContext ctx;
    ::payment::v1::Payment p;
    const grpc::Status s = shard0->GetPayment(&ctx, get, &p);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
    EXPECT_EQ(Trailing(ctx, kShardAddressHeader), services_.payment_shard_address(1));
  }
  {
    grpc::ClientContext ctx;
    ::payment::v1::Payment p;
    ASSERT_OK(client::FromGrpc(shard1->GetPayment(&ctx, get, &p), "GetPayment"));
    EXPECT_EQ(p.idempotency_key(), req.idempotency_key());
  }

  // Each shard lists only its own payments, all named by it.
  for (int k = 0; k < kShards; ++k) {
    auto stub = services_.PaymentShardStub(k);
    int listed = 0;
    ASSERT_OK(client::ForEachPayment(*stub, ::payment::v1::OUTBOX_STATUS_UNSPECIFIED,
                                     absl::Seconds(10), [&](const ::payment::v1::Payment& p) {
                                       ++listed;
                                       EXPECT_EQ(ShardOfPaymentId(p.payment_id()), k);
                                       EXPECT_EQ(ShardOfKey(p.idempotency_key(), kShards), k);
                                     }));
    EXPECT_GT(listed, 0) << "shard " << k;
  }

  ExpectAllDelivered(kPayments + 1);
}

TEST_F(PaymentShardsTest, KillingOneShardUnderLoadLosesAndDuplicatesNothing) {
  constexpr int kPayments = 600;
  PaymentLoad load(services_, "shard-kill-", kPayments, 4, absl::Milliseconds(2));
  ASSERT_TRUE(PollUntil([&] { return load.created() >= kPayments / 4; }, absl::Seconds(60)));
  services_.payment_shard(1).Kill();
  const int at_kill = load.created();
  // Shard 0 keeps serving its keys while shard 1 is down (its callers retry).
  services_.StartPaymentShard(1);
  load.Join();
  std::cout << "created at the kill: " << at_kill << "; client retries: " << load.retries()
            << std::endl;
  ASSERT_EQ(load.created(), kPayments);
  ExpectAllDelivered(kPayments);
}

// Shard 1 dies (SIGKILL, from a failpoint) right after a commit, before its
// messages reach the broker: only its own recovery can send them.
TEST_F(PaymentShardsTest, AShardKilledBetweenCommitAndPublishIsCompletedByItsOwnRecovery) {
  constexpr int kPayments = 300;
  ASSERT_EQ(services_.payment_shard(1).Terminate(), 0);
  services_.StartPaymentShard(
      1, {{"OUTBOX_FAILPOINTS", "payment.after_commit_before_publish=crash@5"}});
  PaymentLoad load(services_, "shard-crash-", kPayments, 4);
  ASSERT_TRUE(PollUntil([&] { return !services_.payment_shard(1).Running(); }, absl::Seconds(60)))
      << "the failpoint never fired";
  services_.StartPaymentShard(1);  // without the failpoint
  load.Join();
  ASSERT_EQ(load.created(), kPayments);
  const std::map<int, int> republished = ExpectAllDelivered(kPayments);
  EXPECT_GT(republished.at(1), 0) << "shard 1's committed, unpublished rows";
}

}  // namespace
}  // namespace outbox::testing
