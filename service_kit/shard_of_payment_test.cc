#include "service_kit/shard_of_payment.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace outbox {
namespace {

// The function is part of the contract (clients compute it too): these values
// pin it, so a change to it fails here before it strands anyone's keys.
TEST(PaymentShardsTest, Fnv1aMatchesTheReferenceVectors) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ULL);
}

TEST(PaymentShardsTest, ShardOfKeyIsPinned) {
  EXPECT_EQ(ShardOfKey("k1", 2), 1);
  EXPECT_EQ(ShardOfKey("k1", 3), 2);
  EXPECT_EQ(ShardOfKey("k1", 10), 6);
  EXPECT_EQ(ShardOfKey("order-42", 2), 0);
  EXPECT_EQ(ShardOfKey("order-42", 10), 7);
  EXPECT_EQ(ShardOfKey("load-abc-3", 3), 2);
}

TEST(PaymentShardsTest, OneShardOrNoneIsAlwaysShardZero) {
  for (const char* key : {"", "k1", "order-42"}) {
    EXPECT_EQ(ShardOfKey(key, 1), 0);
    EXPECT_EQ(ShardOfKey(key, 0), 0);
  }
}

TEST(PaymentShardsTest, KeysSpreadEvenlyAndAGrowingCountMovesFewToTheNewShard) {
  constexpr int kKeys = 20000;
  for (int shards = 2; shards <= 4; ++shards) {
    std::vector<int> per_shard(static_cast<size_t>(shards));
    int moved = 0;
    for (int i = 0; i < kKeys; ++i) {
      const std::string key = "key-" + std::to_string(i);
      const int now = ShardOfKey(key, shards);
      ASSERT_GE(now, 0);
      ASSERT_LT(now, shards);
      ++per_shard[static_cast<size_t>(now)];
      const int before = ShardOfKey(key, shards - 1);
      if (now != before) {
        ++moved;
        EXPECT_EQ(now, shards - 1) << key << " moved between two old shards";
      }
    }
    for (int n : per_shard) EXPECT_NEAR(n, kKeys / shards, kKeys / shards / 10) << shards;
    EXPECT_NEAR(moved, kKeys / shards, kKeys / shards / 10) << shards;
  }
}

TEST(PaymentShardsTest, PaymentIdsNameTheirShard) {
  EXPECT_EQ(PaymentIdPrefix(0, 1), "");
  EXPECT_EQ(PaymentIdPrefix(0, 2), "s0-");
  EXPECT_EQ(PaymentIdPrefix(11, 12), "s11-");
  EXPECT_EQ(ShardOfPaymentId("s0-6f1c0f8e-1d2a-4b3c-8d4e-5f6a7b8c9d0e"), 0);
  EXPECT_EQ(ShardOfPaymentId("s11-x"), 11);
  EXPECT_EQ(ShardOfPaymentId(PaymentIdPrefix(7, 8) + "abc"), 7);
}

TEST(PaymentShardsTest, IdsWithoutAShardPrefixNameNone) {
  for (const char* id : {"", "s", "s-", "s1", "sx-1", "6f1c0f8e-1d2a-4b3c-8d4e-5f6a7b8c9d0e",
                         "s1234567-x", "S1-x", "s1_x"}) {
    EXPECT_FALSE(ShardOfPaymentId(id).has_value()) << id;
  }
}

}  // namespace
}  // namespace outbox
