#include "shared/outbox/internal/relay.h"

#include <gtest/gtest.h>

#include "shared/outbox/internal/state_machine.h"
#include "shared/testing/fakes.h"

namespace outbox {
namespace {

using ::outbox::testing::FakePublisher;
using ::outbox::testing::InMemoryOutbox;
using ::outbox::testing::ManualClock;

class RelayTest : public ::testing::Test {
 protected:
  RelayTest() { broker_.clock = &clock_; }

  // Rows committed and handed over, as the writer does.
  void Commit(int n) {
    std::vector<OutgoingMessage> batch;
    for (int i = 0; i < n; ++i) {
      OutboxMessage row =
          NewOutboxMessage({"m" + std::to_string(next_), "payment", "p" + std::to_string(next_),
                            "EVENTS", "OrderPlaced", "REPLIES", "body"},
                           clock_.NowMillis(), RetryPolicy{});
      ++next_;
      outbox_.Add(row);
      batch.push_back(ToOutgoing(row));
    }
    publisher_.Enqueue(std::move(batch));
  }

  ManualClock clock_;
  FakePublisher broker_;
  InMemoryOutbox outbox_{clock_};
  MetricsRegistry metrics_;
  RelayOptions options_{/*window=*/4, /*capacity=*/10, absl::Seconds(5)};
  Relay publisher_{broker_, outbox_, clock_, metrics_, options_};
  int next_ = 0;
};

TEST_F(RelayTest, PublishesCommittedMessagesAndLeavesRowsSending) {
  Commit(3);
  ASSERT_TRUE(publisher_.Step());
  EXPECT_EQ(broker_.published.size(), 3u);
  EXPECT_EQ(publisher_.confirmed(), 3);
  EXPECT_EQ(broker_.published[0].type, "OrderPlaced");
  EXPECT_EQ(broker_.published[0].reply_to, "REPLIES");
  // Confirmed by the broker is not acknowledged by accounting.
  EXPECT_EQ(outbox_.Row("m0").status, OutboxStatus::kSending);
  EXPECT_EQ(outbox_.Row("m0").last_error, "");
}

TEST_F(RelayTest, KeepsAtMostTheWindowInFlight) {
  broker_.answer = [](const OutgoingMessage&) { return FakePublisher::Answer::kSilent; };
  Commit(6);
  ASSERT_TRUE(publisher_.Step());
  EXPECT_EQ(publisher_.in_flight(), 4u);
  ASSERT_TRUE(publisher_.Step());
  EXPECT_EQ(publisher_.in_flight(), 4u);
}

TEST_F(RelayTest, NackAndReturnAreNotedOnTheRowForRecovery) {
  broker_.answer = [](const OutgoingMessage& m) {
    return m.message_id == "m0" ? FakePublisher::Answer::kNack : FakePublisher::Answer::kReturn;
  };
  Commit(2);
  ASSERT_TRUE(publisher_.Step());
  EXPECT_EQ(publisher_.failed(), 2);
  EXPECT_NE(outbox_.Row("m0").last_error, "");
  EXPECT_NE(outbox_.Row("m1").last_error.find("no queue"), std::string::npos);
  EXPECT_EQ(outbox_.Row("m1").status, OutboxStatus::kSending);
  EXPECT_EQ(outbox_.Row("m1").attempts, 1);  // the attempt was counted at commit
}

TEST_F(RelayTest, AConfirmTimeoutStartsANewConnection) {
  broker_.answer = [](const OutgoingMessage&) { return FakePublisher::Answer::kSilent; };
  Commit(1);
  ASSERT_TRUE(publisher_.Step());  // published; the fake clock moves 20 ms per empty read
  for (int i = 0; i < 300 && publisher_.in_flight() > 0; ++i) publisher_.Step();
  EXPECT_EQ(publisher_.in_flight(), 0u);
  ASSERT_EQ(broker_.resets.size(), 1u);
  EXPECT_NE(broker_.resets[0].find("timed out"), std::string::npos);
  EXPECT_NE(outbox_.Row("m0").last_error.find("timed out"), std::string::npos);
}

// What was in flight when the connection died may or may not have reached
// the broker: the relay publishes it again on the new connection, first,
// rather than leaving it to recovery's next retry (a network cut then heals
// as soon as the link is back). A copy too many is a duplicate accounting
// answers again.
TEST_F(RelayTest, ALostConnectionsMessagesArePublishedAgainFirstOnTheNextOne) {
  broker_.answer = [](const OutgoingMessage&) { return FakePublisher::Answer::kSilent; };
  Commit(2);
  ASSERT_TRUE(publisher_.Step());
  broker_.Drop();
  broker_.answer = [](const OutgoingMessage&) { return FakePublisher::Answer::kAck; };
  ASSERT_TRUE(publisher_.Step());  // reading confirms fails: both noted, and kept
  EXPECT_EQ(publisher_.failed(), 2);
  EXPECT_FALSE(outbox_.Row("m1").last_error.empty());
  Commit(1);
  ASSERT_TRUE(publisher_.Step());
  EXPECT_EQ(broker_.connects, 2);
  EXPECT_EQ(publisher_.confirmed(), 3);
  std::vector<std::string> sent;
  for (const auto& m : broker_.published) sent.push_back(m.message_id);
  EXPECT_EQ(sent, (std::vector<std::string>{"m0", "m1", "m2"}));  // the new connection's
}

TEST_F(RelayTest, WhileTheBrokerIsAwayItQueuesUpToCapacityThenLeavesRowsToRecovery) {
  broker_.reachable = false;
  Commit(12);  // capacity 10
  EXPECT_EQ(publisher_.dropped(), 2);
  ASSERT_TRUE(publisher_.Step());
  EXPECT_TRUE(broker_.published.empty());
  broker_.reachable = true;
  for (int i = 0; i < 5; ++i) publisher_.Step();
  EXPECT_EQ(broker_.published.size(), 10u);
}

TEST_F(RelayTest, WhatRecoveryTookOverWhileQueuedIsNotPublishedLate) {
  Relay publisher(broker_, outbox_, clock_, metrics_,
                  {/*window=*/4, /*capacity=*/10, absl::Seconds(5), absl::Seconds(5)});
  broker_.reachable = false;
  std::vector<OutgoingMessage> queued;
  for (const char* id : {"taken", "untouched", "fresh"}) {
    if (std::string(id) == "fresh") clock_.Advance(absl::Seconds(5));
    OutboxMessage row =
        NewOutboxMessage({id, "order", id, "EVENTS", "OrderPlaced", "REPLIES", "body"},
                         clock_.NowMillis(), RetryPolicy{});
    outbox_.Add(row);
    publisher.Enqueue({ToOutgoing(row)});
  }
  ASSERT_TRUE(publisher.Step());
  // Recovery re-published "taken" (attempt 2) while the broker was away from
  // the relay; "untouched" waited as long but nobody sent it.
  ASSERT_EQ(outbox_.ClaimDue(clock_.NowMillis(), 1, "", RetryPolicy{})->to_publish.size(), 1u);
  ASSERT_EQ(outbox_.Row("taken").attempts, 2);
  broker_.reachable = true;
  for (int i = 0; i < 3; ++i) publisher.Step();
  std::vector<std::string> sent;
  for (const auto& m : broker_.published) sent.push_back(m.message_id);
  EXPECT_EQ(sent, (std::vector<std::string>{"untouched", "fresh"}));
  EXPECT_EQ(publisher.handed_over(), 1);
}

// A commit that took long (a big transaction ahead of it) hands its rows
// over late: their first retry counts from the commit's time stamp, not from
// the hand-over, so recovery may have them already and the relay asks.
TEST_F(RelayTest, RowsOfASlowCommitAreJudgedFromTheirOwnTimeStamp) {
  Relay publisher(broker_, outbox_, clock_, metrics_,
                  {/*window=*/4, /*capacity=*/10, absl::Seconds(5), absl::Seconds(5)});
  OutboxMessage row =
      NewOutboxMessage({"slow", "order", "slow", "EVENTS", "OrderPlaced", "REPLIES", "b"},
                       clock_.NowMillis(), RetryPolicy{});
  const absl::Time written_at = clock_.Now();
  outbox_.Add(row);
  clock_.Advance(absl::Seconds(6));  // the commit returns only now
  ASSERT_EQ(outbox_.ClaimDue(clock_.NowMillis(), 1, "", RetryPolicy{})->to_publish.size(), 1u);
  publisher.Enqueue({ToOutgoing(row)}, written_at);
  for (int i = 0; i < 3; ++i) publisher.Step();
  EXPECT_TRUE(broker_.published.empty())
      << "recovery's copy is out; the relay's would be a duplicate";
  EXPECT_EQ(publisher.handed_over(), 1);
}

TEST_F(RelayTest, EachPositiveConfirmIsTimedFromItsPublish) {
  broker_.hold_confirms = true;
  Commit(2);
  ASSERT_TRUE(publisher_.Step());  // published; the empty read takes 20 ms
  clock_.Advance(absl::Milliseconds(30));
  broker_.hold_confirms = false;
  ASSERT_TRUE(publisher_.Step());
  ASSERT_EQ(publisher_.confirmed(), 2);
  broker_.answer = [](const OutgoingMessage&) { return FakePublisher::Answer::kNack; };
  Commit(1);
  ASSERT_TRUE(publisher_.Step());  // a nack is a failure, not a confirm to time
  ASSERT_EQ(publisher_.failed(), 1);
  const std::string text = metrics_.Render();
  EXPECT_NE(text.find("# TYPE outbox_fast_publish_confirm_seconds histogram\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("\noutbox_fast_publish_confirm_seconds_count 2\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("\noutbox_fast_publish_confirm_seconds_sum 0.1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("\noutbox_fast_publish_confirm_seconds_bucket{le=\"0.025\"} 0\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\noutbox_fast_publish_confirm_seconds_bucket{le=\"0.05\"} 2\n"),
            std::string::npos)
      << text;
}

TEST_F(RelayTest, StopDrainsWhatIsQueuedThenEnds) {
  Commit(2);
  publisher_.Start();
  publisher_.Stop();
  EXPECT_EQ(broker_.published.size(), 2u);
  EXPECT_FALSE(publisher_.Step());
}

TEST_F(RelayTest, ANoteThatCannotBeWrittenIsCountedAndTheRowLeftToRecovery) {
  broker_.answer = [](const OutgoingMessage&) { return FakePublisher::Answer::kNack; };
  Commit(1);
  outbox_.fail_with = absl::UnavailableError("database is locked");
  ASSERT_TRUE(publisher_.Step());
  EXPECT_EQ(publisher_.failed(), 1);
  EXPECT_EQ(outbox_.Row("m0").last_error, "");
  EXPECT_EQ(outbox_.Row("m0").status, OutboxStatus::kSending);
  const std::string noted =
      R"(outbox_store_write_failures_total{write="record_publish_failure"} 1)";
  EXPECT_NE(metrics_.Render().find(noted), std::string::npos);
}

}  // namespace
}  // namespace outbox
