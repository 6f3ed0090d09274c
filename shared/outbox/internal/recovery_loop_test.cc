#include "shared/outbox/internal/recovery_loop.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include "shared/outbox/internal/state_machine.h"
#include "shared/testing/fakes.h"
#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

using ::outbox::testing::FakePublisher;
using ::outbox::testing::InMemoryOutbox;
using ::outbox::testing::ManualClock;
using ::outbox::testing::RecordingAlerts;

class RecoveryLoopTest : public ::testing::Test {
 protected:
  RecoveryLoopTest() {
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
    outbox_.Add(
        NewOutboxMessage({id, "order", "p-" + id, "EVENTS", "OrderPlaced", "REPLIES", "body-" + id},
                         clock_.NowMillis(), written));
  }

  RecoveryLoop& Worker() {
    if (!worker_) {
      worker_ =
          std::make_unique<RecoveryLoop>(outbox_, broker_, alerts_, clock_, metrics_, options_);
    }
    return *worker_;
  }

  ManualClock clock_;
  FakePublisher broker_;
  InMemoryOutbox outbox_{clock_};
  RecordingAlerts alerts_;
  MetricsRegistry metrics_;
  RecoveryOptions options_ = [] {
    RecoveryOptions o;
    o.watched_queues = {"EVENTS"};
    o.dead_letter_sources = {"EVENTS", "REPLIES"};
    o.hold_alert_after = absl::ZeroDuration();  // RepublishHoldGraceTest has the grace
    return o;
  }();
  std::unique_ptr<RecoveryLoop> worker_;
};

TEST_F(RecoveryLoopTest, RepublishesDueRowsAsStoredWithLinearBackoff) {
  Committed("m1");
  Worker().Step();
  EXPECT_TRUE(Worker().lease_held());
  EXPECT_TRUE(broker_.published.empty());  // not due yet: attempt 1 was the fast path
  clock_.Advance(absl::Seconds(1));
  Worker().Step();
  ASSERT_EQ(broker_.published.size(), 1u);
  EXPECT_EQ(broker_.published[0].topic, "EVENTS");
  EXPECT_EQ(broker_.published[0].reply_to, "REPLIES");
  EXPECT_EQ(broker_.published[0].type, "OrderPlaced");
  EXPECT_EQ(broker_.published[0].body, "body-m1");
  EXPECT_EQ(outbox_.Row("m1").attempts, 2);
  EXPECT_EQ(outbox_.Row("m1").next_retry_at, clock_.NowMillis() + 2000);
  EXPECT_EQ(Worker().republished(), 1);
}

TEST_F(RecoveryLoopTest, WhileNoAcknowledgementArrivesOneProbePerFirstRetryDelay) {
  Committed("a1");
  ASSERT_OK(outbox_.RecordAcks({"a1"}));  // acknowledgements did flow
  clock_.Advance(absl::Seconds(1));
  for (const char* id : {"m1", "m2", "m3"}) Committed(id);
  clock_.Advance(absl::Seconds(1));  // all due; nothing acknowledged since they were written
  Worker().Step();
  ASSERT_EQ(broker_.published.size(), 1u);  // the probe
  EXPECT_EQ(Worker().hold(), DeliveryHold::kAcksStalled);
  Worker().Step();
  EXPECT_EQ(broker_.published.size(), 1u);  // the next probe waits a first delay
  EXPECT_TRUE(alerts_.raised.empty());
  // The probe's acknowledgement: the path works. With copies still queued
  // the other rows wait one more step (theirs may be among them), then go out.
  broker_.queues["EVENTS"] = {2, 1};
  clock_.Advance(absl::Milliseconds(300));
  ASSERT_OK(outbox_.RecordAcks({broker_.published[0].message_id}));
  clock_.Advance(absl::Milliseconds(300));
  Worker().Step();
  EXPECT_EQ(Worker().hold(), DeliveryHold::kNone);
  EXPECT_EQ(broker_.published.size(), 1u);
  clock_.Advance(absl::Seconds(1));  // held back one step; not a stall again
  Worker().Step();
  EXPECT_EQ(broker_.published.size(), 3u);
}

// A consumer that stops (frozen, or cut off unnoticed) holds the copies it
// had taken unacknowledged; they were published just before its last
// acknowledgement and come due first. The first round is already one probe,
// not a copy of each.
TEST_F(RecoveryLoopTest, AConsumerThatStopsGetsOneProbeFromTheFirstRound) {
  for (int i = 0; i < 5; ++i) Committed(absl::StrCat("held", i));  // taken, never answered
  clock_.Advance(absl::Milliseconds(200));
  Committed("a1");
  ASSERT_OK(outbox_.RecordAcks({"a1"}));    // its last acknowledgement
  clock_.Advance(absl::Milliseconds(800));  // the held ones come due
  Worker().Step();
  EXPECT_EQ(broker_.published.size(), 1u);  // the probe
  EXPECT_EQ(Worker().hold(), DeliveryHold::kAcksStalled);
}

// A copy lost while the consumer went on answering later ones is sent again
// when it comes due, with no probe first.
TEST_F(RecoveryLoopTest, ACopyLostWhileAcknowledgementsGoOnIsRepublished) {
  Committed("lost");
  clock_.Advance(absl::Milliseconds(600));
  Committed("a1");
  ASSERT_OK(outbox_.RecordAcks({"a1"}));  // answered 0.6 s after the lost one's publish
  clock_.Advance(absl::Milliseconds(400));
  Worker().Step();
  ASSERT_EQ(broker_.published.size(), 1u);
  EXPECT_EQ(broker_.published[0].message_id, outbox_.Row("lost").message_id);
  EXPECT_EQ(Worker().hold(), DeliveryHold::kNone);
}

TEST_F(RecoveryLoopTest, WithTheProducerAwayAStallRepublishesEachDueRowOnce) {
  options_.reply_queues = {"REPLIES"};
  broker_.queues["REPLIES"] = {0, 0};  // nobody listens: the producer is away
  Committed("a1");
  ASSERT_OK(outbox_.RecordAcks({"a1"}));  // acknowledgements did flow
  clock_.Advance(absl::Seconds(1));
  for (const char* id : {"m1", "m2", "m3"}) Committed(id);
  clock_.Advance(absl::Seconds(1));  // all due; nothing acknowledged since
  Worker().Step();
  // Its fast path is cut with its listener: every due row goes, not a probe,
  // and waits the longest delay for its acknowledgement before the next.
  EXPECT_EQ(broker_.published.size(), 3u);
  EXPECT_EQ(Worker().hold(), DeliveryHold::kNone);
  EXPECT_EQ(outbox_.Row("m1").next_retry_at,
            clock_.NowMillis() + absl::ToInt64Milliseconds(options_.retry.max_delay));
  Committed("m4");
  clock_.Advance(absl::Seconds(1));
  Worker().Step();  // rows coming due meanwhile go too; the others not again
  ASSERT_EQ(broker_.published.size(), 4u);
  EXPECT_EQ(broker_.published[3].message_id, outbox_.Row("m4").message_id);
  // Still away when those come due again: their copies are confirmed and
  // their acknowledgements wait for the producer, so the stall holds.
  clock_.Advance(options_.retry.max_delay);
  Worker().Step();
  EXPECT_EQ(Worker().hold(), DeliveryHold::kAcksStalled);
  EXPECT_EQ(broker_.published.size(), 5u);  // one probe
  EXPECT_TRUE(alerts_.raised.empty());
  // Back: it reads the acknowledgements that waited.
  broker_.queues["REPLIES"] = {0, 1};
  ASSERT_OK(outbox_.RecordAcks({outbox_.Row("m1").message_id, outbox_.Row("m2").message_id,
                                outbox_.Row("m3").message_id, outbox_.Row("m4").message_id}));
  Worker().Step();
  EXPECT_EQ(Worker().hold(), DeliveryHold::kNone);
  EXPECT_EQ(broker_.published.size(), 5u);
}

TEST_F(RecoveryLoopTest, AStallWithTheProducerListeningHoldsWithOneProbe) {
  options_.reply_queues = {"REPLIES"};
  broker_.queues["REPLIES"] = {40, 1};  // its listener is there
  Committed("a1");
  ASSERT_OK(outbox_.RecordAcks({"a1"}));
  clock_.Advance(absl::Seconds(1));
  for (const char* id : {"m1", "m2", "m3"}) Committed(id);
  clock_.Advance(absl::Seconds(1));
  Worker().Step();
  EXPECT_EQ(broker_.published.size(), 1u);  // the probe
  EXPECT_EQ(Worker().hold(), DeliveryHold::kAcksStalled);
}

TEST_F(RecoveryLoopTest, AnExhaustedRowTurnsFailedWithOneAlert) {
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

TEST_F(RecoveryLoopTest, ANackIsNotedAndTheRowStaysDueLater) {
  Committed("m1");
  broker_.answer = [](const OutgoingMessage&) { return FakePublisher::Answer::kNack; };
  clock_.Advance(absl::Seconds(1));
  Worker().Step();
  EXPECT_EQ(Worker().publish_failures(), 1);
  EXPECT_EQ(outbox_.Row("m1").status, OutboxStatus::kSending);
  EXPECT_NE(outbox_.Row("m1").last_error, "");
}

TEST_F(RecoveryLoopTest, AConfirmTimeoutResetsTheConnection) {
  Committed("m1");
  broker_.answer = [](const OutgoingMessage&) { return FakePublisher::Answer::kSilent; };
  clock_.Advance(absl::Seconds(1));
  Worker().Step();
  EXPECT_EQ(Worker().publish_failures(), 1);
  EXPECT_EQ(outbox_.Row("m1").last_error, "re-publish not confirmed by broker");
}

TEST_F(RecoveryLoopTest, EachRoundIsTimed) {
  Committed("m1");
  Worker().Step();  // nothing due: a round that only looks at the queue
  broker_.answer = [](const OutgoingMessage&) { return FakePublisher::Answer::kSilent; };
  clock_.Advance(absl::Seconds(1));
  Worker().Step();  // m1 re-published, its confirm awaited for confirm_timeout (5 s)
  const std::string text = metrics_.Render();
  EXPECT_NE(text.find("# TYPE outbox_recovery_round_seconds histogram\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("\noutbox_recovery_round_seconds_count 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\noutbox_recovery_round_seconds_bucket{le=\"0.001\"} 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\noutbox_recovery_round_seconds_bucket{le=\"2.5\"} 1\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("\noutbox_recovery_round_seconds_bucket{le=\"10\"} 2\n"), std::string::npos)
      << text;
}

TEST_F(RecoveryLoopTest, RepeatedBrokerFailuresYieldTheLease) {
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

TEST_F(RecoveryLoopTest, AStandbyDoesNotClaimWhileAnotherHoldsTheLease) {
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

TEST_F(RecoveryLoopTest, ALostLeaseStopsTheClaimAtTheFence) {
  Committed("m1");
  Worker().Step();
  ASSERT_TRUE(Worker().lease_held());
  outbox_.lease = {"other", clock_.NowMillis() + 1'000'000};  // taken over meanwhile
  clock_.Advance(absl::Seconds(1));
  Worker().Step();  // renewal is not due yet: the claim's fence catches it
  EXPECT_FALSE(Worker().lease_held());
  EXPECT_TRUE(broker_.published.empty());
}

TEST_F(RecoveryLoopTest, ALeaseHandedOverLeavesItsAlertsToTheNewHolder) {
  options_.lease_ttl = absl::Seconds(3);
  options_.housekeeping_every = absl::ZeroDuration();
  Committed("m1", /*max_attempts=*/1);
  Committed("m2");
  clock_.Advance(absl::Seconds(1));
  Worker().Step();  // m1 exhausted: FAILED, with its alert
  broker_.queues["EVENTS"] = {1, 0};
  clock_.Advance(absl::Seconds(1));
  Worker().Step();  // nobody consumes EVENTS: held, with its alert
  ASSERT_EQ(Worker().hold(), DeliveryHold::kConsumerDown);
  ASSERT_EQ(alerts_.Active("OutboxConsumerDown"), 1);
  ASSERT_EQ(alerts_.Active("OutboxMessageFailed"), 1);
  ASSERT_EQ(Worker().active_alerts(), 2);

  // Another instance takes the lease over; the incident and its alerts
  // (same names and labels) are its now. This one drops its own without a
  // resolve, which would end the new holder's alerts too.
  outbox_.lease = {"other", clock_.NowMillis() + 1'000'000};
  clock_.Advance(absl::Seconds(2));  // the renewal is due: refused
  Worker().Step();
  EXPECT_FALSE(Worker().lease_held());
  EXPECT_EQ(Worker().active_alerts(), 0);
  EXPECT_EQ(Worker().hold(), DeliveryHold::kNone);
  EXPECT_TRUE(alerts_.resolved.empty());
  const size_t raised = alerts_.raised.size();
  for (int i = 0; i < 3; ++i) {  // a standby neither refreshes nor raises them
    clock_.Advance(absl::Minutes(2));
    outbox_.lease.expires_at = clock_.NowMillis() + 1'000'000;
    Worker().Step();
  }
  EXPECT_EQ(alerts_.raised.size(), raised);
  EXPECT_TRUE(alerts_.refreshed.empty());
  EXPECT_TRUE(alerts_.resolved.empty());

  // The lease back: the alerts are raised again from what is true now.
  outbox_.lease.expires_at = clock_.NowMillis();
  Worker().Step();
  ASSERT_TRUE(Worker().lease_held());
  EXPECT_EQ(Worker().hold(), DeliveryHold::kConsumerDown);
  EXPECT_EQ(Worker().active_alerts(), 2);
}

TEST_F(RecoveryLoopTest, OneBacklogAlertPerEpisode) {
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
  ASSERT_OK(outbox_.RecordAcks({"m1", "m2"}));
  Worker().Step();  // the backlog cleared: its alert resolves
  EXPECT_EQ(alerts_.Active("OutboxBacklog"), 0);
}

TEST_F(RecoveryLoopTest, WithAShardedConsumerOneShardDownHoldsAndReadyAddsUp) {
  options_.watched_queues = {"EVENTS-0", "EVENTS-1"};
  options_.watched_label = "EVENTS";
  options_.hold_queue_depth = 100;
  Committed("m1");
  broker_.queues["EVENTS-0"] = {0, 1};
  broker_.queues["EVENTS-1"] = {3, 0};  // shard 1 is down
  clock_.Advance(absl::Seconds(1));
  Worker().Step();
  EXPECT_EQ(Worker().hold(), DeliveryHold::kConsumerDown);
  EXPECT_TRUE(broker_.published.empty());
  EXPECT_EQ(outbox_.Row("m1").attempts, 1);  // deferred, not spent

  broker_.queues["EVENTS-1"] = {3, 1};   // back
  broker_.queues["EVENTS-0"] = {98, 1};  // 98 + 3 ready over 100: a backlog together
  clock_.Advance(absl::Seconds(5));
  Worker().Step();
  EXPECT_EQ(Worker().hold(), DeliveryHold::kQueueBacklog);

  broker_.queues["EVENTS-0"] = {0, 1};
  clock_.Advance(absl::Seconds(30));
  Worker().Step();
  EXPECT_EQ(Worker().hold(), DeliveryHold::kNone);
  clock_.Advance(absl::Seconds(30));
  Worker().Step();
  ASSERT_EQ(broker_.published.size(), 1u);
  EXPECT_EQ(broker_.published[0].topic, "EVENTS");    // the hash exchange picks the shard
  EXPECT_EQ(broker_.published[0].shard_key, "p-m1");  // the row's biz_key
}

TEST_F(RecoveryLoopTest, ADrainingBacklogIsNotRepublishedUntilItIsNearlyGone) {
  options_.hold_queue_depth = 100;
  Committed("m1");
  Committed("m2");
  broker_.queues["EVENTS"] = {5000, 0};  // the consumer down, copies queued
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(absl::Seconds(1));
    Worker().Step();
  }
  // Back, and consuming: below the hold depth, but not yet down to a tenth.
  broker_.queues["EVENTS"] = {60, 1};
  clock_.Advance(absl::Seconds(1));
  Worker().Step();
  EXPECT_EQ(Worker().hold(), DeliveryHold::kQueueBacklog);
  EXPECT_TRUE(broker_.published.empty());
  ASSERT_OK(outbox_.RecordAcks({"m1"}));  // its copy was delivered
  broker_.queues["EVENTS"] = {3, 1};
  clock_.Advance(absl::Seconds(1));
  Worker().Step();
  EXPECT_EQ(Worker().hold(), DeliveryHold::kNone);
  EXPECT_TRUE(broker_.published.empty());  // m2 gets a backoff step first
  EXPECT_EQ(Worker().deferred(), 1);
  EXPECT_GT(outbox_.Row("m2").next_retry_at, clock_.NowMillis());
  // Its copy never came back: once the step has passed it is re-published.
  clock_.Advance(absl::Seconds(2));
  Worker().Step();
  ASSERT_EQ(broker_.published.size(), 1u);
  EXPECT_EQ(broker_.published[0].message_id, "m2");
  EXPECT_EQ(outbox_.Row("m2").attempts, 2);
}

TEST_F(RecoveryLoopTest, NobodyConsumingHoldsRowsWithoutSpendingAttemptsAndAlertsOnce) {
  Committed("m1", /*max_attempts=*/2);
  Committed("m2", /*max_attempts=*/2);
  broker_.queues["EVENTS"] = {2, 0};  // the fast-path copies wait; the consumer is down
  for (int i = 0; i < 10; ++i) {      // far past the budget of two attempts
    clock_.Advance(absl::Seconds(1));
    Worker().Step();
  }
  EXPECT_TRUE(broker_.published.empty());  // another copy would only wait there too
  EXPECT_EQ(outbox_.Row("m1").attempts, 1);
  EXPECT_EQ(outbox_.Row("m1").status, OutboxStatus::kSending);
  // Due, but neither spent nor rewritten while the hold lasts.
  EXPECT_LE(outbox_.Row("m1").next_retry_at, clock_.NowMillis());
  EXPECT_EQ(Worker().deferred(), 0);
  EXPECT_EQ(Worker().hold(), DeliveryHold::kConsumerDown);
  ASSERT_EQ(alerts_.raised.size(), 1u);  // one alert for the incident, not one per row
  EXPECT_EQ(alerts_.raised[0].name, "OutboxConsumerDown");
  EXPECT_EQ(alerts_.raised[0].labels.at("queue"), "EVENTS");
  EXPECT_EQ(alerts_.raised[0].annotations.at("rows_waiting"), "2");
  EXPECT_EQ(alerts_.raised[0].annotations.at("consumers"), "0");

  // The consumer is back and takes the queued copies: the alert resolves, and
  // due rows get one more backoff step before any copy is re-published.
  broker_.queues["EVENTS"] = {2, 1};
  clock_.Advance(absl::Seconds(5));
  Worker().Step();
  EXPECT_EQ(Worker().hold(), DeliveryHold::kNone);
  EXPECT_EQ(alerts_.Active("OutboxConsumerDown"), 0);
  ASSERT_EQ(alerts_.resolved.size(), 1u);
  EXPECT_TRUE(broker_.published.empty());
  EXPECT_EQ(Worker().deferred(), 2);
  EXPECT_GT(outbox_.Row("m1").next_retry_at, clock_.NowMillis());
  ASSERT_OK(outbox_.RecordAcks({"m1", "m2"}));
  clock_.Advance(absl::Seconds(5));
  Worker().Step();
  EXPECT_TRUE(broker_.published.empty());
  EXPECT_EQ(outbox_.Row("m1").status, OutboxStatus::kSent);
  EXPECT_EQ(alerts_.raised.size(), 1u);
}

TEST_F(RecoveryLoopTest, WhenAHoldEndsARowWhosePublishFailedGoesAtOnce) {
  Committed("m1");
  Committed("m2");
  // m1's publish failed (its confirm timed out, a connection dropped): no
  // copy of it is queued. m2's copy waits in the queue.
  ASSERT_OK(outbox_.RecordPublishFailure({"m1"}, "publish confirm timed out", clock_.NowMillis()));
  broker_.queues["EVENTS"] = {1, 0};
  clock_.Advance(absl::Seconds(2));
  Worker().Step();
  ASSERT_EQ(Worker().hold(), DeliveryHold::kConsumerDown);
  broker_.queues["EVENTS"] = {1, 1};  // the consumer is back
  Worker().Step();
  EXPECT_EQ(Worker().hold(), DeliveryHold::kNone);
  EXPECT_EQ(Worker().deferred(), 1);  // m2 only
  ASSERT_EQ(broker_.published.size(), 1u);
  EXPECT_EQ(broker_.published[0].message_id, "m1");
  EXPECT_EQ(outbox_.Row("m1").attempts, 2);
  EXPECT_EQ(outbox_.Row("m2").attempts, 1);
  EXPECT_GT(outbox_.Row("m2").next_retry_at, clock_.NowMillis());
}

TEST_F(RecoveryLoopTest, AQueueFarBehindHoldsToo) {
  options_.hold_queue_depth = 100;
  Committed("m1");
  broker_.queues["EVENTS"] = {5000, 1};
  clock_.Advance(absl::Seconds(2));
  Worker().Step();
  EXPECT_TRUE(broker_.published.empty());
  EXPECT_EQ(outbox_.Row("m1").attempts, 1);
  ASSERT_EQ(alerts_.raised.size(), 1u);
  EXPECT_EQ(alerts_.raised[0].name, "OutboxQueueBacklog");
  EXPECT_EQ(alerts_.raised[0].annotations.at("depth"), "5000");
  // Consumers gone as well: the incident changes name, still one alert active.
  broker_.queues["EVENTS"] = {5000, 0};
  Worker().Step();
  EXPECT_EQ(alerts_.Active("OutboxQueueBacklog"), 0);
  EXPECT_EQ(alerts_.Active("OutboxConsumerDown"), 1);
}

TEST_F(RecoveryLoopTest, NothingWaitingMeansNoAlertWhileTheConsumerIsDown) {
  broker_.queues["EVENTS"] = {0, 0};
  Worker().Step();
  Worker().Step();
  EXPECT_EQ(Worker().hold(), DeliveryHold::kConsumerDown);
  EXPECT_TRUE(alerts_.raised.empty());
}

TEST_F(RecoveryLoopTest, AQueueNotDeclaredYetIsUnconsumedNotABrokerFailure) {
  // The producer declares EVENTS; recovery's broker user may not.
  Committed("m1");
  broker_.missing = {"EVENTS", "EVENTS.DLQ"};
  options_.housekeeping_every = absl::ZeroDuration();
  options_.dead_letter_sources = {"EVENTS"};
  for (int i = 0; i < 5; ++i) {
    clock_.Advance(absl::Seconds(1));
    Worker().Step();
  }
  EXPECT_EQ(Worker().hold(), DeliveryHold::kConsumerDown);
  EXPECT_TRUE(Worker().lease_held());  // no failures counted, so the lease is kept
  EXPECT_TRUE(broker_.published.empty());
  EXPECT_EQ(outbox_.Row("m1").attempts, 1);
  EXPECT_EQ(alerts_.Active("OutboxDeadLetters"), 0);
  EXPECT_TRUE(broker_.resets.empty());  // nor a reason to drop the connection
}

TEST_F(RecoveryLoopTest, ConsumerPresentButMessagesLostIsRepublishedAndBudgeted) {
  // The queue is short and consumed, yet no acknowledgement came: the broker
  // or a consumer lost the message. Re-publishing is what helps here.
  Committed("m1", /*max_attempts=*/2);
  broker_.queues["EVENTS"] = {0, 1};
  clock_.Advance(absl::Seconds(1));
  Worker().Step();
  EXPECT_EQ(broker_.published.size(), 1u);
  clock_.Advance(absl::Seconds(2));
  Worker().Step();
  EXPECT_EQ(outbox_.Row("m1").status, OutboxStatus::kFailed);
  EXPECT_EQ(alerts_.Active("OutboxMessageFailed"), 1);
}

TEST_F(RecoveryLoopTest, AFailedAlertResolvesOnceALateAckClosesTheRow) {
  options_.housekeeping_every = absl::ZeroDuration();
  Committed("m1", /*max_attempts=*/1);
  Committed("m2", /*max_attempts=*/1);
  clock_.Advance(absl::Seconds(1));
  Worker().Step();
  ASSERT_EQ(outbox_.Row("m1").status, OutboxStatus::kFailed);
  EXPECT_EQ(alerts_.Active("OutboxMessageFailed"), 2);
  Worker().Step();  // housekeeping sees both still FAILED: nothing new
  EXPECT_EQ(alerts_.raised.size(), 2u);
  ASSERT_EQ(outbox_.RecordAcks({"m1"})->late, 1);  // the consumer processed it after all
  Worker().Step();
  EXPECT_EQ(alerts_.Active("OutboxMessageFailed"), 1);
  ASSERT_EQ(alerts_.resolved.size(), 1u);
  EXPECT_EQ(alerts_.resolved[0].labels.at("message_id"), "m1");
  EXPECT_EQ(alerts_.resolved[0].ends_at, clock_.Now());
}

TEST_F(RecoveryLoopTest, DeadLetterQueueAlertsWhileNotEmpty) {
  options_.housekeeping_every = absl::ZeroDuration();
  broker_.queues["EVENTS.DLQ"] = {3, 0};
  Worker().Step();
  Worker().Step();
  ASSERT_EQ(alerts_.raised.size(), 1u);
  EXPECT_EQ(alerts_.raised[0].name, "OutboxDeadLetters");
  EXPECT_EQ(alerts_.raised[0].labels.at("queue"), "EVENTS.DLQ");
  EXPECT_EQ(alerts_.raised[0].annotations.at("depth"), "3");
  broker_.queues["EVENTS.DLQ"] = {0, 0};  // re-driven or purged
  Worker().Step();
  EXPECT_EQ(alerts_.Active("OutboxDeadLetters"), 0);
}

TEST_F(RecoveryLoopTest, OurOwnDeadConnectionCostsNoAttempt) {
  Committed("m1");
  Worker().Step();
  ASSERT_TRUE(broker_.connected());
  clock_.Advance(absl::Seconds(1));
  broker_.Drop();  // closed by the broker while we sat idle
  Worker().Step();
  ASSERT_EQ(broker_.published.size(), 1u);  // noticed and replaced before use
  EXPECT_EQ(broker_.lost(), 1);
  EXPECT_EQ(Worker().publish_failures(), 0);
  EXPECT_EQ(outbox_.Row("m1").last_error, "");
  EXPECT_EQ(outbox_.Row("m1").attempts, 2);  // the re-publish itself, nothing more
}

TEST_F(RecoveryLoopTest, IdleWaitPollsTheConnection) {
  options_.idle_sleep = absl::Milliseconds(600);
  Worker().Step();
  broker_.Drop();
  Worker().Step();  // nothing due: the idle wait polls, notices, and resets
  EXPECT_EQ(broker_.lost(), 1);
  EXPECT_FALSE(broker_.resets.empty());
}

// Housekeeping archives a bounded pass; while rows past their retention
// are left, each turn archives another pass rather than waiting for the next
// housekeeping.
TEST_F(RecoveryLoopTest, ABacklogPastTheRetentionDrainsTurnByTurn) {
  options_.archive_batch = 2;
  for (int i = 0; i < 45; ++i) {
    const std::string id = absl::StrCat("m", i);
    outbox_.Add(NewOutboxMessage({id, "order", "p-" + id, "EVENTS", "OrderPlaced", "REPLIES", ""},
                                 clock_.NowMillis(), options_.retry));
    ASSERT_OK(outbox_.RecordAcks({id}));
  }
  clock_.Advance(options_.retention + absl::Seconds(1));
  Worker().Step();
  EXPECT_EQ(outbox_.archived, 40);  // one bounded pass
  Worker().Step();
  EXPECT_EQ(outbox_.archived, 45);  // the next turn, long before the next housekeeping
  Worker().Step();
  EXPECT_EQ(outbox_.archived, 45);
}

TEST_F(RecoveryLoopTest, StepReleasesTheLeaseOnceStopped) {
  Worker().Step();
  ASSERT_TRUE(Worker().lease_held());
  Worker().Stop();
  EXPECT_FALSE(Worker().Step());
  EXPECT_FALSE(Worker().lease_held());
  EXPECT_LE(outbox_.lease.expires_at, clock_.NowMillis());
}

}  // namespace
}  // namespace outbox
