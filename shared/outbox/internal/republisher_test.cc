#include "shared/outbox/internal/republisher.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "shared/observability/log.h"
#include "shared/outbox/internal/state_machine.h"
#include "shared/testing/fakes.h"
#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

using ::outbox::testing::FakePublisher;
using ::outbox::testing::InMemoryOutbox;
using ::outbox::testing::ManualClock;
using ::outbox::testing::RecordingAlerts;

class RepublisherTest : public ::testing::Test {
 protected:
  RepublisherTest() {
    broker_.clock = &clock_;
    options_.instance_id = "r1";
    options_.retry.base_delay = absl::Seconds(1);
    EXPECT_OK(broker_.Connect());
    EXPECT_TRUE(lease_.Keep(clock_.Now()).held);
  }

  // A row whose fast-path publish was never acknowledged, due now.
  void Due(const std::string& id, int max_attempts = 3) {
    RetryPolicy written = options_.retry;
    written.max_attempts = max_attempts;
    outbox_.Add(
        NewOutboxMessage({id, "order", "p-" + id, "EVENTS", "OrderPlaced", "REPLIES", "body-" + id},
                         clock_.NowMillis() - 1'000, written));
  }

  Republisher& Make() {
    if (!republisher_) {
      republisher_ = std::make_unique<Republisher>(outbox_, broker_, lease_, alerts_, clock_,
                                                   metrics_, options_);
    }
    return *republisher_;
  }

  ManualClock clock_;
  FakePublisher broker_;
  InMemoryOutbox outbox_{clock_};
  RecordingAlerts sink_;
  MetricsRegistry metrics_;
  RecoveryOptions options_;
  LeaseKeeper lease_{outbox_, metrics_, "r1", absl::Seconds(10)};
  RecoveryAlerts alerts_{sink_, clock_, RecoveryOptions{}};
  std::unique_ptr<Republisher> republisher_;
};

TEST_F(RepublisherTest, PublishesDueRowsAsStoredAndSpendsAnAttempt) {
  Due("m1");
  const Republisher::Round round = Make().Run();
  EXPECT_EQ(round.handled, 1);
  EXPECT_EQ(round.publish, Republisher::Round::Publish::kConfirmed);
  ASSERT_EQ(broker_.published.size(), 1u);
  EXPECT_EQ(broker_.published[0].body, "body-m1");
  EXPECT_EQ(broker_.published[0].shard_key, "p-m1");
  EXPECT_EQ(outbox_.Row("m1").attempts, 2);
  EXPECT_EQ(Make().republished(), 1);
  EXPECT_NE(metrics_.Render().find("outbox_republished_total 1"), std::string::npos);
}

// A row stamped with another budget than recovery's policy gives its topic
// was written by a producer with another RetryPolicy: said once per topic
// and budget; the row keeps its budget.
TEST_F(RepublisherTest, ABudgetOtherThanRecoverysIsWarnedAboutOnce) {
  std::vector<std::string> warned;
  SetLogSink([&](const LogRecord& r) {
    if (r.event == "retry_policy_mismatch") warned.emplace_back(r.line);
  });
  Due("m1", options_.retry.max_attempts);  // the same policy: nothing to say
  Make().Run();
  EXPECT_TRUE(warned.empty());
  Due("m2", 3);
  Due("m3", 3);
  Make().Run();
  ASSERT_EQ(warned.size(), 1u);
  EXPECT_NE(warned[0].find("row_max_attempts=3"), std::string::npos) << warned[0];
  EXPECT_NE(warned[0].find("recovery_max_attempts=10"), std::string::npos) << warned[0];
  EXPECT_EQ(outbox_.Row("m2").max_attempts, 3);
  EXPECT_EQ(outbox_.Row("m2").attempts, 2);  // re-published all the same
  Due("m4", 4);
  Make().Run();
  EXPECT_EQ(warned.size(), 2u);
  SetLogSink(nullptr);
}

// A topic of recovery's own policy replaces the row's budget at the claim:
// nothing to warn about.
TEST_F(RepublisherTest, ATopicPolicyOfRecoverysOwnIsNotAMismatch) {
  options_.retry.topics["EVENTS"].max_attempts = 7;
  int warned = 0;
  SetLogSink([&](const LogRecord& r) { warned += r.event == "retry_policy_mismatch"; });
  Due("m1", 3);
  Make().Run();
  SetLogSink(nullptr);
  EXPECT_EQ(warned, 0);
  EXPECT_EQ(outbox_.Row("m1").max_attempts, 7);
}

TEST_F(RepublisherTest, NothingDueIsAnIdleRound) {
  const Republisher::Round round = Make().Run();
  EXPECT_EQ(round.handled, 0);
  EXPECT_EQ(round.publish, Republisher::Round::Publish::kNone);
  EXPECT_EQ(round.throttled, absl::ZeroDuration());
}

TEST_F(RepublisherTest, ANackIsNotedOnTheRowAndFailsTheRound) {
  Due("m1");
  broker_.answer = [](const OutgoingMessage&) { return FakePublisher::Answer::kNack; };
  EXPECT_EQ(Make().Run().publish, Republisher::Round::Publish::kFailed);
  EXPECT_EQ(Make().publish_failures(), 1);
  EXPECT_EQ(Make().republished(), 0);
  EXPECT_EQ(outbox_.Row("m1").last_error, "re-publish not confirmed by broker");
  EXPECT_EQ(outbox_.Row("m1").status, OutboxStatus::kSending);
}

TEST_F(RepublisherTest, ABrokerThatCannotBeReachedFailsEveryRowWithItsError) {
  Due("m1");
  Due("m2");
  broker_.Drop();
  broker_.reachable = false;
  EXPECT_EQ(Make().Run().publish, Republisher::Round::Publish::kFailed);
  EXPECT_EQ(Make().publish_failures(), 2);
  EXPECT_NE(outbox_.Row("m2").last_error, "");
  EXPECT_NE(outbox_.Row("m2").last_error, "re-publish not confirmed by broker");
  EXPECT_FALSE(broker_.resets.empty());
}

TEST_F(RepublisherTest, AnExhaustedRowTurnsFailedWithItsAlert) {
  Due("m1", /*max_attempts=*/1);
  const Republisher::Round round = Make().Run();
  EXPECT_EQ(round.handled, 1);
  EXPECT_EQ(round.publish, Republisher::Round::Publish::kNone);
  EXPECT_TRUE(broker_.published.empty());
  EXPECT_EQ(outbox_.Row("m1").status, OutboxStatus::kFailed);
  EXPECT_EQ(Make().failed(), 1);
  ASSERT_EQ(sink_.raised.size(), 1u);
  EXPECT_EQ(sink_.raised[0].name, "OutboxMessageFailed");
  EXPECT_EQ(alerts_.active(), 1u);
}

TEST_F(RepublisherTest, TheRateLimitThrottlesWithoutClaiming) {
  options_.rate_per_second = 1;
  Due("m1");
  Due("m2");
  EXPECT_EQ(Make().Run().handled, 1);  // one token: one row
  const Republisher::Round round = Make().Run();
  EXPECT_EQ(round.handled, 1);  // work may be waiting: no idle wait
  EXPECT_GT(round.throttled, absl::ZeroDuration());
  EXPECT_EQ(broker_.published.size(), 1u);
  EXPECT_EQ(outbox_.Row("m2").attempts, 1);
}

TEST_F(RepublisherTest, AClaimRefusedAtTheFenceMeansTheLeaseIsLost) {
  Due("m1");
  outbox_.lease = {"other", clock_.NowMillis() + 60'000};
  EXPECT_EQ(Make().Run().handled, 0);
  EXPECT_FALSE(lease_.held());
  EXPECT_TRUE(broker_.published.empty());
  EXPECT_EQ(outbox_.Row("m1").attempts, 1);
}

TEST_F(RepublisherTest, ANoteThatCannotBeWrittenIsCountedAndTheAttemptStaysSpent) {
  Due("m1");
  broker_.answer = [this](const OutgoingMessage&) {
    outbox_.fail_with = absl::UnavailableError("database is locked");  // after the claim
    return FakePublisher::Answer::kNack;
  };
  EXPECT_EQ(Make().Run().publish, Republisher::Round::Publish::kFailed);
  outbox_.fail_with = absl::OkStatus();
  EXPECT_EQ(outbox_.Row("m1").attempts, 2);
  EXPECT_EQ(outbox_.Row("m1").last_error, "");
  const std::string noted =
      R"(outbox_store_write_failures_total{write="record_publish_failure"} 1)";
  EXPECT_NE(metrics_.Render().find(noted), std::string::npos);
}

}  // namespace
}  // namespace outbox
