#include "recovery_service/recovery_worker.h"

#include <gtest/gtest.h>

#include "shared/outbox/state_machine.h"
#include "shared/testing/fakes.h"

namespace outbox::recovery {
namespace {

using ::outbox::testing::FakePublisher;
using ::outbox::testing::InMemoryOutbox;
using ::outbox::testing::ManualClock;
using ::outbox::testing::RecordingAlerts;

class RecoveryWorkerTest : public ::testing::Test {
 protected:
  RecoveryWorkerTest() {
    broker_.clock = &clock_;
    options_.instance_id = "r1";
    options_.retry.base_delay = absl::Seconds(1);
    options_.retry.max_delay = absl::Seconds(10);
    options_.idle_sleep = absl::ZeroDuration();
    options_.housekeeping_every = absl::Hours(1);
    options_.backlog_threshold = 1000;
  }

  // A row committed `age` ago whose fast-path publish was never acknowledged.
  void Committed(const std::string& id, int max_attempts = 3) {
    RetryPolicy written = options_.retry;
    written.max_attempts = max_attempts;
    outbox_.Add(NewOutboxMessage({id, "payment", "p-" + id, "PAY_QUEUE", "PaymentCreated",
                                  "ACC_QUEUE", "body-" + id},
                                 clock_.NowMillis(), written));
  }

  RecoveryWorker& Worker() {
    if (!worker_) {
      worker_ = std::make_unique<RecoveryWorker>(outbox_, broker_, alerts_, clock_, metrics_,
                                                 options_);
    }
    return *worker_;
  }

  ManualClock clock_;
  FakePublisher broker_;
  InMemoryOutbox outbox_{clock_};
  RecordingAlerts alerts_;
  MetricsRegistry metrics_;
  RecoveryOptions options_;
  std::unique_ptr<RecoveryWorker> worker_;
};

TEST_F(RecoveryWorkerTest, RepublishesDueRowsAsStoredWithLinearBackoff) {
  Committed("m1");
  Worker().Step();
  EXPECT_TRUE(Worker().lease_held());
  EXPECT_TRUE(broker_.published.empty());  // not due yet: attempt 1 was the fast path
  clock_.Advance(absl::Seconds(1));
  Worker().Step();
  ASSERT_EQ(broker_.published.size(), 1u);
  EXPECT_EQ(broker_.published[0].routing_key, "PAY_QUEUE");
  EXPECT_EQ(broker_.published[0].reply_to, "ACC_QUEUE");
  EXPECT_EQ(broker_.published[0].type, "PaymentCreated");
  EXPECT_EQ(broker_.published[0].body, "body-m1");
  EXPECT_EQ(outbox_.Row("m1").attempts, 2);
  EXPECT_EQ(outbox_.Row("m1").next_retry_at, clock_.NowMillis() + 2000);
  EXPECT_EQ(Worker().republished(), 1);
}

TEST_F(RecoveryWorkerTest, AnExhaustedRowTurnsFailedWithOneAlert) {
  Committed("m1", /*max_attempts=*/2);
  clock_.Advance(absl::Seconds(1));
  Worker().Step();  // attempt 2
  clock_.Advance(absl::Seconds(2));
  Worker().Step();  // budget spent
  EXPECT_EQ(outbox_.Row("m1").status, OutboxStatus::kFailed);
  ASSERT_EQ(alerts_.raised.size(), 1u);
  EXPECT_EQ(alerts_.raised[0].name, "OutboxMessageFailed");
  EXPECT_EQ(alerts_.raised[0].labels.at("message_id"), "m1");
  EXPECT_EQ(Worker().failed(), 1);
  clock_.Advance(absl::Minutes(1));
  Worker().Step();
  EXPECT_EQ(alerts_.raised.size(), 1u);
  EXPECT_EQ(broker_.published.size(), 1u);
}

TEST_F(RecoveryWorkerTest, ANackIsNotedAndTheRowStaysDueLater) {
  Committed("m1");
  broker_.answer = [](const OutgoingMessage&) { return FakePublisher::Answer::kNack; };
  clock_.Advance(absl::Seconds(1));
  Worker().Step();
  EXPECT_EQ(Worker().publish_failures(), 1);
  EXPECT_EQ(outbox_.Row("m1").status, OutboxStatus::kSending);
  EXPECT_NE(outbox_.Row("m1").last_error, "");
}

TEST_F(RecoveryWorkerTest, AConfirmTimeoutResetsTheConnection) {
  Committed("m1");
  broker_.answer = [](const OutgoingMessage&) { return FakePublisher::Answer::kSilent; };
  clock_.Advance(absl::Seconds(1));
  Worker().Step();
  EXPECT_EQ(Worker().publish_failures(), 1);
  EXPECT_EQ(outbox_.Row("m1").last_error, "re-publish not confirmed by broker");
}

TEST_F(RecoveryWorkerTest, RepeatedBrokerFailuresYieldTheLease) {
  options_.max_publish_failures = 2;
  options_.lease_ttl = absl::Milliseconds(1);  // keeps the yield's sleep short
  broker_.reachable = false;
  Worker().Step();
  EXPECT_TRUE(Worker().lease_held());
  Worker().Step();
  EXPECT_FALSE(Worker().lease_held());
  EXPECT_EQ(Worker().lease_yields(), 1);
  EXPECT_LE(outbox_.lease.expires_at, clock_.NowMillis());  // released for others
}

TEST_F(RecoveryWorkerTest, AStandbyDoesNotClaimWhileAnotherHoldsTheLease) {
  options_.lease_ttl = absl::Milliseconds(30);
  outbox_.lease = {"other", clock_.NowMillis() + 1'000'000};
  Committed("m1");
  clock_.Advance(absl::Seconds(5));
  outbox_.lease.expires_at = clock_.NowMillis() + 1'000'000;
  Worker().Step();
  EXPECT_FALSE(Worker().lease_held());
  EXPECT_TRUE(broker_.published.empty());
  EXPECT_EQ(outbox_.Row("m1").attempts, 1);
}

TEST_F(RecoveryWorkerTest, ALostLeaseStopsTheClaimAtTheFence) {
  Committed("m1");
  Worker().Step();
  ASSERT_TRUE(Worker().lease_held());
  outbox_.lease = {"other", clock_.NowMillis() + 1'000'000};  // taken over meanwhile
  clock_.Advance(absl::Seconds(1));
  Worker().Step();  // renewal is not due yet: the claim's fence catches it
  EXPECT_FALSE(Worker().lease_held());
  EXPECT_TRUE(broker_.published.empty());
}

TEST_F(RecoveryWorkerTest, OneBacklogAlertPerEpisode) {
  options_.backlog_threshold = 1;
  options_.backlog_age = absl::Seconds(1);
  options_.housekeeping_every = absl::ZeroDuration();
  options_.retry.max_attempts = 1000;
  Committed("m1", 1000);
  Committed("m2", 1000);
  clock_.Advance(absl::Seconds(2));
  Worker().Step();
  Worker().Step();
  EXPECT_EQ(alerts_.raised.size(), 1u);
  EXPECT_EQ(alerts_.raised[0].name, "OutboxBacklog");
}

TEST_F(RecoveryWorkerTest, StepReleasesTheLeaseOnceStopped) {
  Worker().Step();
  ASSERT_TRUE(Worker().lease_held());
  Worker().Stop();
  EXPECT_FALSE(Worker().Step());
  EXPECT_FALSE(Worker().lease_held());
  EXPECT_LE(outbox_.lease.expires_at, clock_.NowMillis());
}

}  // namespace
}  // namespace outbox::recovery
