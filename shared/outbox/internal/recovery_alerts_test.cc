#include "shared/outbox/internal/recovery_alerts.h"

#include <gtest/gtest.h>

#include "shared/outbox/internal/state_machine.h"
#include "shared/testing/fakes.h"
#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

using ::outbox::testing::FakePublisher;
using ::outbox::testing::InMemoryOutbox;
using ::outbox::testing::ManualClock;
using ::outbox::testing::RecordingAlerts;

RecoveryOptions AlertOptions() {
  RecoveryOptions options;
  options.backlog_threshold = 1;
  options.backlog_age = absl::Seconds(1);
  options.dead_letter_sources = {"EVENTS"};
  options.biz_key_label = "order_id";
  options.consumer_name = "shipping";
  return options;
}

class RecoveryAlertsTest : public ::testing::Test {
 protected:
  RecoveryAlertsTest() { EXPECT_OK(broker_.Connect()); }

  OutboxMessage NewRow(const std::string& id) {
    return NewOutboxMessage({id, "order", "p-" + id, "EVENTS", "OrderPlaced", "REPLIES", ""},
                            clock_.NowMillis(), RetryPolicy{});
  }
  void Sending(const std::string& id) { outbox_.Add(NewRow(id)); }
  void Failed(const std::string& id) {
    OutboxMessage row = NewRow(id);
    row.status = OutboxStatus::kFailed;
    row.attempts = 3;
    outbox_.Add(row);
  }

  ManualClock clock_;
  FakePublisher broker_;
  InMemoryOutbox outbox_{clock_};
  RecordingAlerts sink_;
  RecoveryAlerts alerts_{sink_, clock_, AlertOptions()};
};

TEST(FailedAlertTest, NamesTheRowAndWhyItFailed) {
  OutboxMessage row;
  row.message_id = "m1";
  row.biz_type = "order";
  row.biz_key = "p1";
  row.attempts = 5;
  Alert alert = FailedAlert(row, AlertOptions());
  EXPECT_EQ(alert.name, "OutboxMessageFailed");
  EXPECT_EQ(alert.labels.at("message_id"), "m1");
  EXPECT_EQ(alert.labels.at("order_id"), "p1");
  EXPECT_EQ(alert.annotations.at("summary"),
            "outbox message m1 for order p1 failed after 5 attempts");
  EXPECT_EQ(alert.annotations.at("last_error"), "no acknowledgement from shipping");
  row.last_error = "publish returned";
  EXPECT_EQ(FailedAlert(row, AlertOptions()).annotations.at("last_error"), "publish returned");
}

TEST_F(RecoveryAlertsTest, AFailedRowAlertsUntilALateAckClosesIt) {
  Failed("m1");
  Failed("m2");
  alerts_.MessageFailed(outbox_.Row("m1"));  // the claim turned it FAILED
  EXPECT_EQ(sink_.raised.size(), 1u);
  alerts_.Refresh(outbox_, broker_);
  EXPECT_EQ(sink_.Active("OutboxMessageFailed"), 2);
  EXPECT_EQ(alerts_.active(), 2u);
  ASSERT_EQ(outbox_.RecordAcks({"m1"})->late, 1);
  alerts_.Refresh(outbox_, broker_);
  ASSERT_EQ(sink_.resolved.size(), 1u);
  EXPECT_EQ(sink_.resolved[0].labels.at("message_id"), "m1");
  EXPECT_EQ(alerts_.active(), 1u);
}

TEST_F(RecoveryAlertsTest, AnOldSendingBacklogAlertsOverItsThresholdUntilItClears) {
  Sending("m1");
  Sending("m2");
  alerts_.Refresh(outbox_, broker_);
  EXPECT_TRUE(sink_.raised.empty());  // not old enough yet
  clock_.Advance(absl::Seconds(2));
  alerts_.Refresh(outbox_, broker_);
  ASSERT_EQ(sink_.raised.size(), 1u);
  EXPECT_EQ(sink_.raised[0].name, "OutboxBacklog");
  EXPECT_EQ(sink_.raised[0].annotations.at("count"), "2");
  EXPECT_EQ(sink_.raised[0].annotations.at("threshold"), "1");
  ASSERT_OK(outbox_.RecordAcks({"m1", "m2"}));
  alerts_.Refresh(outbox_, broker_);
  EXPECT_EQ(sink_.Active("OutboxBacklog"), 0);
}

TEST_F(RecoveryAlertsTest, ADeadLetterQueueAlertsWhileNotEmptyAndStaysWhileUnseen) {
  broker_.queues["EVENTS.DLQ"] = {3, 0};
  alerts_.Refresh(outbox_, broker_);
  ASSERT_EQ(sink_.raised.size(), 1u);
  EXPECT_EQ(sink_.raised[0].name, "OutboxDeadLetters");
  EXPECT_EQ(sink_.raised[0].labels.at("queue"), "EVENTS.DLQ");
  EXPECT_EQ(sink_.raised[0].annotations.at("depth"), "3");
  broker_.queues["EVENTS.DLQ"] = {0, 0};
  broker_.Drop();  // cannot look: nothing is resolved on a guess
  alerts_.Refresh(outbox_, broker_);
  EXPECT_EQ(sink_.Active("OutboxDeadLetters"), 1);
  ASSERT_OK(broker_.Connect());
  alerts_.Refresh(outbox_, broker_);
  EXPECT_EQ(sink_.Active("OutboxDeadLetters"), 0);
}

// The recovery role counts under the queue's lock (DeadLetters::Count): a
// queue another process is looking at is not counted empty but unavailable,
// and its alert stays.
TEST_F(RecoveryAlertsTest, ADeadLetterQueueCountedAsAListingDoesStaysWhileItCannotBe) {
  absl::StatusOr<int64_t> depth = 2;
  alerts_.CountDeadLettersWith([&](const std::string& queue) {
    EXPECT_EQ(queue, "EVENTS");
    return depth;
  });
  broker_.queues["EVENTS.DLQ"] = {0, 0};  // the broker's ready count is not asked
  alerts_.Refresh(outbox_, broker_);
  ASSERT_EQ(sink_.raised.size(), 1u);
  EXPECT_EQ(sink_.raised[0].annotations.at("depth"), "2");
  depth = absl::UnavailableError(
      "dead-letter queue EVENTS.DLQ is being read by another process; try again");
  alerts_.Refresh(outbox_, broker_);
  EXPECT_EQ(sink_.Active("OutboxDeadLetters"), 1);
  EXPECT_TRUE(sink_.resolved.empty());
  depth = 0;
  alerts_.Refresh(outbox_, broker_);
  EXPECT_EQ(sink_.Active("OutboxDeadLetters"), 0);
  depth = absl::NotFoundError("no queue");
  alerts_.Refresh(outbox_, broker_);
  EXPECT_EQ(sink_.raised.size(), 1u);
}

TEST_F(RecoveryAlertsTest, ADeadLetterQueueNotDeclaredYetHoldsNothing) {
  broker_.missing = {"EVENTS.DLQ"};
  alerts_.Refresh(outbox_, broker_);
  EXPECT_TRUE(sink_.raised.empty());
}

TEST_F(RecoveryAlertsTest, AFamilyWhoseSourceCannotBeReadIsLeftAsItIs) {
  Failed("m1");
  alerts_.Refresh(outbox_, broker_);
  ASSERT_EQ(sink_.Active("OutboxMessageFailed"), 1);
  ASSERT_OK(outbox_.RecordAcks({"m1"}));
  outbox_.fail_with = absl::UnavailableError("database is locked");
  alerts_.Refresh(outbox_, broker_);
  EXPECT_EQ(sink_.Active("OutboxMessageFailed"), 1);
  EXPECT_TRUE(sink_.resolved.empty());
}

}  // namespace
}  // namespace outbox
