#include "client/percentiles.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace outbox::client {
namespace {

TEST(SummarizeTest, EmptyIsNaN) {
  const Percentiles p = Summarize({});
  EXPECT_EQ(p.n, 0u);
  EXPECT_TRUE(std::isnan(p.p50));
  EXPECT_TRUE(std::isnan(p.p99));
  EXPECT_TRUE(std::isnan(p.p999));
  EXPECT_TRUE(std::isnan(p.max));
}

TEST(SummarizeTest, OneValueIsEveryPercentile) {
  const Percentiles p = Summarize({7.5});
  EXPECT_EQ(p.n, 1u);
  EXPECT_EQ(p.p50, 7.5);
  EXPECT_EQ(p.p99, 7.5);
  EXPECT_EQ(p.p999, 7.5);
  EXPECT_EQ(p.max, 7.5);
}

TEST(SummarizeTest, NearestRankOfShuffledInput) {
  std::vector<double> v;
  for (int i = 1; i <= 1000; ++i) v.push_back(i);
  std::shuffle(v.begin(), v.end(), std::mt19937(1));
  const Percentiles p = Summarize(v);
  EXPECT_EQ(p.n, 1000u);
  EXPECT_EQ(p.p50, 500);
  EXPECT_EQ(p.p99, 990);
  EXPECT_EQ(p.p999, 999);
  EXPECT_EQ(p.max, 1000);
}

TEST(SummarizeTest, SmallSetsRoundUp) {
  const Percentiles p = Summarize({3, 1, 2});
  EXPECT_EQ(p.p50, 2);  // rank ceil(1.5) = 2
  EXPECT_EQ(p.p99, 3);
  EXPECT_EQ(p.max, 3);
}

}  // namespace
}  // namespace outbox::client
