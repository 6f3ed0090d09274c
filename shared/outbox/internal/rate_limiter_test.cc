#include "shared/outbox/internal/rate_limiter.h"

#include "shared/testing/manual_clock.h"

#include <gtest/gtest.h>

namespace outbox {
namespace {

TEST(RateLimiterTest, AllowsOneSecondOfBurstThenTheRate) {
  outbox::testing::ManualClock clock;
  RateLimiter limiter(100, clock);
  EXPECT_EQ(limiter.Take(500), 100);
  EXPECT_EQ(limiter.Take(10), 0);
  EXPECT_GT(limiter.UntilNext(), absl::ZeroDuration());
  clock.Advance(absl::Milliseconds(250));
  EXPECT_EQ(limiter.Take(500), 25);
  clock.Advance(absl::Seconds(60));
  EXPECT_EQ(limiter.Take(500), 100);  // never more than one second's worth
}

}  // namespace
}  // namespace outbox
