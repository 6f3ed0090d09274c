#include "shared/outbox/internal/lease_keeper.h"

#include <gtest/gtest.h>

#include "shared/testing/fakes.h"

namespace outbox {
namespace {

using ::outbox::testing::InMemoryOutbox;
using ::outbox::testing::ManualClock;

class LeaseKeeperTest : public ::testing::Test {
 protected:
  ManualClock clock_;
  InMemoryOutbox outbox_{clock_};
  MetricsRegistry metrics_;
  LeaseKeeper lease_{outbox_, metrics_, "r1", absl::Seconds(30)};
};

TEST_F(LeaseKeeperTest, TakesAFreeLeaseAndRenewsItEveryThirdOfItsTtl) {
  EXPECT_TRUE(lease_.Keep(clock_.Now()).held);
  EXPECT_TRUE(lease_.held());
  EXPECT_EQ(outbox_.lease.holder, "r1");
  const int64_t first_expiry = outbox_.lease.expires_at;
  EXPECT_EQ(first_expiry, clock_.NowMillis() + 30'000);
  clock_.Advance(absl::Seconds(9));
  EXPECT_TRUE(lease_.Keep(clock_.Now()).held);
  EXPECT_EQ(outbox_.lease.expires_at, first_expiry);  // not due for renewal yet
  clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(lease_.Keep(clock_.Now()).held);
  EXPECT_EQ(outbox_.lease.expires_at, clock_.NowMillis() + 30'000);
  EXPECT_NE(metrics_.Render().find("outbox_lease_held 1"), std::string::npos);
}

TEST_F(LeaseKeeperTest, AStandbyWaitsUntilTheHoldersLeaseRunsOut) {
  outbox_.lease = {"other", clock_.NowMillis() + 2'000};
  LeaseKeeper::Turn turn = lease_.Keep(clock_.Now());
  EXPECT_FALSE(turn.held);
  EXPECT_EQ(turn.standby, absl::Milliseconds(2'005));
  EXPECT_EQ(turn.retry, absl::ZeroDuration());
  EXPECT_EQ(outbox_.lease.holder, "other");
  // Never longer than a renewal period, in case the holder gives it up.
  outbox_.lease.expires_at = clock_.NowMillis() + 60'000;
  EXPECT_EQ(lease_.Keep(clock_.Now()).standby, absl::Seconds(10));
  // Run out: taken over.
  clock_.Advance(absl::Seconds(61));
  EXPECT_TRUE(lease_.Keep(clock_.Now()).held);
  EXPECT_EQ(outbox_.lease.holder, "r1");
}

TEST_F(LeaseKeeperTest, AStoreErrorIsRetriedASecondLater) {
  outbox_.fail_with = absl::UnavailableError("database is locked");
  LeaseKeeper::Turn turn = lease_.Keep(clock_.Now());
  EXPECT_FALSE(turn.held);
  EXPECT_EQ(turn.retry, absl::Seconds(1));
  EXPECT_EQ(turn.standby, absl::ZeroDuration());
}

TEST_F(LeaseKeeperTest, ARenewalRefusedOrAFenceMeansTheLeaseIsLost) {
  ASSERT_TRUE(lease_.Keep(clock_.Now()).held);
  outbox_.lease = {"other", clock_.NowMillis() + 1'000'000};  // taken over meanwhile
  clock_.Advance(absl::Seconds(10));
  EXPECT_FALSE(lease_.Keep(clock_.Now()).held);
  EXPECT_FALSE(lease_.held());

  outbox_.lease = {};
  ASSERT_TRUE(lease_.Keep(clock_.Now()).held);
  lease_.Lost();  // a claim's fence said so
  EXPECT_FALSE(lease_.held());
}

TEST_F(LeaseKeeperTest, AYieldGivesTheLeaseUpAndIsCounted) {
  ASSERT_TRUE(lease_.Keep(clock_.Now()).held);
  lease_.Yield(/*failures=*/3, clock_.NowMillis());
  EXPECT_FALSE(lease_.held());
  EXPECT_EQ(lease_.yields(), 1);
  EXPECT_LE(outbox_.lease.expires_at, clock_.NowMillis());  // free for others
  EXPECT_NE(metrics_.Render().find("outbox_lease_yields_total 1"), std::string::npos);
}

TEST_F(LeaseKeeperTest, ReleaseGivesUpOnlyALeaseItHolds) {
  outbox_.lease = {"other", clock_.NowMillis() + 60'000};
  lease_.Release(clock_.NowMillis());
  EXPECT_EQ(outbox_.lease.expires_at, clock_.NowMillis() + 60'000);

  outbox_.lease = {};
  ASSERT_TRUE(lease_.Keep(clock_.Now()).held);
  lease_.Release(clock_.NowMillis());
  EXPECT_FALSE(lease_.held());
  EXPECT_LE(outbox_.lease.expires_at, clock_.NowMillis());
}

TEST_F(LeaseKeeperTest, AReleaseThatCannotBeWrittenIsCountedAndTheLeaseRunsOut) {
  ASSERT_TRUE(lease_.Keep(clock_.Now()).held);
  const int64_t expiry = outbox_.lease.expires_at;
  outbox_.fail_with = absl::UnavailableError("database is locked");
  lease_.Release(clock_.NowMillis());
  EXPECT_FALSE(lease_.held());
  EXPECT_EQ(outbox_.lease.expires_at, expiry);  // another instance takes it once it runs out
  EXPECT_NE(metrics_.Render().find("outbox_store_write_failures_total{write=\"release_lease\"} 1"),
            std::string::npos);
}

}  // namespace
}  // namespace outbox
