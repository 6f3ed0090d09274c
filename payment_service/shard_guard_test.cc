#include "payment_service/shard_guard.h"

#include <grpcpp/test/server_context_test_spouse.h>
#include <gtest/gtest.h>

#include "service_kit/grpc/grpc_status.h"
#include "service_kit/shard_of_payment.h"
#include "shared/testing/sequential_ids.h"
#include "shared/testing/status_matchers.h"

namespace outbox::payment {
namespace {

using ::outbox::testing::StatusIs;
using ::testing::HasSubstr;

ShardConfig TwoShards(int index) {
  auto config = ParseShardConfig("127.0.0.1:7001,127.0.0.1:7002", index);
  EXPECT_OK(config);
  return *config;
}

// A key of each shard of two (ShardOfKey is pinned in shard_of_payment_test.cc).
std::string KeyOf(int shard) {
  for (int i = 0;; ++i) {
    std::string key = "key-" + std::to_string(i);
    if (ShardOfKey(key, 2) == shard) return key;
  }
}

TEST(ParseShardConfigTest, EmptyIsOneShard) {
  auto config = ParseShardConfig("", 0);
  ASSERT_OK(config);
  EXPECT_EQ(config->count(), 1);
  EXPECT_EQ(ParseShardConfig("", 1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ParseShardConfigTest, ListsAddressesByIndexAndRejectsBadOnes) {
  EXPECT_EQ(TwoShards(1).count(), 2);
  EXPECT_EQ(TwoShards(1).addresses[1], "127.0.0.1:7002");
  auto out_of_range = ParseShardConfig("a:1,b:2", 2);
  EXPECT_EQ(out_of_range.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(out_of_range.status().message().find("--payment_shard_index"), std::string::npos);
  auto bad = ParseShardConfig("a:1,,b:2", 0);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--payment_shards"), std::string::npos);
  EXPECT_THAT(ParseShardConfig("a:1,nohostport", 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--payment_shards")));
  EXPECT_THAT(ParseShardConfig("a:1", -1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--payment_shard_index")));
}

TEST(ShardGuardTest, OneShardServesEverything) {
  ShardGuard guard;
  grpc::ServerContext ctx;
  EXPECT_OK(FromGrpcStatus(guard.CheckKey(ctx, KeyOf(1))));
  EXPECT_OK(FromGrpcStatus(guard.CheckPaymentId(ctx, "s1-abc")));
  EXPECT_TRUE(grpc::testing::ServerContextTestSpouse(&ctx).GetTrailingMetadata().empty());
}

TEST(ShardGuardTest, ServesItsOwnKeysAndIds) {
  ShardGuard guard(TwoShards(0));
  grpc::ServerContext ctx;
  EXPECT_OK(FromGrpcStatus(guard.CheckKey(ctx, KeyOf(0))));
  EXPECT_OK(FromGrpcStatus(guard.CheckKey(ctx, "")));  // validation answers it
  EXPECT_OK(FromGrpcStatus(guard.CheckPaymentId(ctx, "s0-abc")));
  // An id from before sharding.
  EXPECT_OK(FromGrpcStatus(guard.CheckPaymentId(ctx, "6f1c0f8e-1d2a-4b3c")));
  EXPECT_TRUE(grpc::testing::ServerContextTestSpouse(&ctx).GetTrailingMetadata().empty());
}

TEST(ShardGuardTest, AnotherShardsKeyIsAnsweredWithWhereToGo) {
  ShardGuard guard(TwoShards(0));
  grpc::ServerContext ctx;
  const grpc::Status s = guard.CheckKey(ctx, KeyOf(1));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(s.error_message(),
            "idempotency_key belongs to payment shard 1 at 127.0.0.1:7002 (this is shard 0 of 2)");
  const auto trailing = grpc::testing::ServerContextTestSpouse(&ctx).GetTrailingMetadata();
  ASSERT_EQ(trailing.count(kShardHeader), 1u);
  EXPECT_EQ(trailing.find(kShardHeader)->second, "1");
  EXPECT_EQ(trailing.find(kShardAddressHeader)->second, "127.0.0.1:7002");
}

TEST(ShardGuardTest, AnotherShardsPaymentIdIsAnsweredWithWhereToGo) {
  ShardGuard guard(TwoShards(1));
  grpc::ServerContext ctx;
  const grpc::Status s = guard.CheckPaymentId(ctx, "s0-abc");
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("payment shard 0 at 127.0.0.1:7001"), std::string::npos);
  const auto trailing = grpc::testing::ServerContextTestSpouse(&ctx).GetTrailingMetadata();
  EXPECT_EQ(trailing.find(kShardAddressHeader)->second, "127.0.0.1:7001");
  grpc::ServerContext ctx2;
  EXPECT_EQ(guard.CheckPaymentId(ctx2, "s5-abc").error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST(ShardIdsTest, PrefixesIdsWithTheShardOnlyWhenThereAreSeveral) {
  outbox::testing::SequentialIds seq;
  ShardIds single(seq, ShardConfig{});
  EXPECT_EQ(ShardOfPaymentId(single.NewId()), std::nullopt);
  ShardIds second(seq, TwoShards(1));
  const std::string id = second.NewId();
  EXPECT_EQ(id.rfind("s1-", 0), 0u) << id;
  EXPECT_EQ(ShardOfPaymentId(id), 1);
}

}  // namespace
}  // namespace outbox::payment
