#include "shared/outbox/internal/republish_hold.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <utility>
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

TEST(HoldForTest, HoldFollowsConsumersAndDepth) {
  EXPECT_EQ(HoldFor({0, 0}, 100), DeliveryHold::kConsumerDown);
  EXPECT_EQ(HoldFor({5, 0}, 100), DeliveryHold::kConsumerDown);
  EXPECT_EQ(HoldFor({101, 2}, 100), DeliveryHold::kQueueBacklog);
  EXPECT_EQ(HoldFor({100, 1}, 100), DeliveryHold::kNone);
  EXPECT_EQ(HoldFor({0, 1}, 0), DeliveryHold::kNone);
}

TEST(HoldForTest, AHoldLastsUntilTheQueueIsDownToATenth) {
  // Consumers back with 50 copies queued: still held, as a backlog.
  EXPECT_EQ(HoldFor({50, 1}, 100, DeliveryHold::kConsumerDown), DeliveryHold::kQueueBacklog);
  EXPECT_EQ(HoldFor({11, 1}, 100, DeliveryHold::kQueueBacklog), DeliveryHold::kQueueBacklog);
  EXPECT_EQ(HoldFor({10, 1}, 100, DeliveryHold::kQueueBacklog), DeliveryHold::kNone);
  EXPECT_EQ(HoldFor({10, 1}, 100, DeliveryHold::kConsumerDown), DeliveryHold::kNone);
  EXPECT_EQ(HoldFor({50, 0}, 100, DeliveryHold::kQueueBacklog), DeliveryHold::kConsumerDown);
  EXPECT_EQ(HoldFor({50, 1}, 100, DeliveryHold::kNone), DeliveryHold::kNone);  // not held yet
}

TEST(AcksStalledTest, DueRowsAndNoAcknowledgementForAFirstRetryDelay) {
  const absl::Duration quiet = absl::Seconds(5);
  // The oldest due row was published at 9'000 (due 14'000), nothing acked since 8'000.
  EXPECT_TRUE(AcksStalled({/*last_acked_at=*/8'000, /*first_due_at=*/14'000,
                           /*first_due_published_at=*/9'000},
                          15'000, quiet));
  // Acknowledged 0.5 s after its publish, then nothing for 5.5 s: a consumer
  // that stopped with its copy in hand.
  EXPECT_TRUE(AcksStalled({9'500, 14'000, 9'000}, 15'000, quiet));
  // Acknowledgements went on 2.5 s after its publish: its copy was lost.
  EXPECT_FALSE(AcksStalled({11'500, 14'000, 9'000}, 15'000, quiet));
  EXPECT_FALSE(AcksStalled({14'000, 14'000, 9'000}, 15'000, quiet));  // and go on now
  EXPECT_FALSE(AcksStalled({8'000, 16'000, 9'000}, 15'000, quiet));   // nothing due yet
  EXPECT_FALSE(AcksStalled({8'000, 0, 0}, 15'000, quiet));            // nothing SENDING
  EXPECT_FALSE(AcksStalled({0, 14'000, 9'000}, 15'000, quiet));       // never acked: no flow
  // Held back after an acknowledgement (due moved, last publish did not).
  EXPECT_FALSE(AcksStalled({12'000, 14'000, 9'000}, 18'000, quiet));
}

TEST(InspectQueuesTest, AGroupAddsUpReadyAndCountsItsLeastConsumedQueue) {
  FakePublisher broker;
  ASSERT_OK(broker.Connect());
  broker.queues["Q-0"] = {4, 2};
  broker.queues["Q-1"] = {3, 1};
  auto state = InspectQueues(broker, {"Q-0", "Q-1"});
  ASSERT_OK(state);
  EXPECT_EQ(state->ready, 7);
  EXPECT_EQ(state->consumers, 1);
}

TEST(InspectQueuesTest, AQueueNotDeclaredYetHasNobodyConsumingIt) {
  FakePublisher broker;
  ASSERT_OK(broker.Connect());
  broker.queues["Q-0"] = {4, 2};
  broker.missing = {"Q-1"};
  auto state = InspectQueues(broker, {"Q-0", "Q-1"});
  ASSERT_OK(state);
  EXPECT_EQ(state->ready, 0);
  EXPECT_EQ(state->consumers, 0);
}

// --- NextHold, one case per row of its table (republish_hold.h), and the
// queue alert's grace.

constexpr int64_t kNowMs = 100'000;
constexpr int64_t kAwayLately = 90'000;                  // away for 10 s: less than max_delay
constexpr int64_t kAwayLongAgo = 30'000;                 // away for 70 s: more than max_delay
constexpr AckProgress kStalled{90'000, 99'000, 95'000};  // nothing acked since before the publish
constexpr AckProgress kFlowing{99'900, 99'000, 95'000};  // acked 100 ms ago
constexpr QueueState kDown{5, 0};
constexpr QueueState kDeep{101, 1};     // over hold_queue_depth (100)
constexpr QueueState kDraining{50, 1};  // over a tenth of it
constexpr QueueState kDrained{10, 1};   // a tenth of it
constexpr QueueState kEmpty{0, 1};

RecoveryOptions TableOptions() {
  RecoveryOptions options;
  options.retry.base_delay = absl::Seconds(1);
  options.retry.max_delay = absl::Seconds(60);
  options.hold_queue_depth = 100;
  options.hold_alert_after = absl::Seconds(30);
  return options;
}

enum class Asked { kNo, kListening, kAway };  // whether (and what) the producer is asked
using P = HoldStep::Producer;

struct HoldRow {
  const char* name;
  DeliveryHold before;
  bool was_away;  // state.producer_away (since away_since)
  int64_t away_since;
  QueueState queue;
  AckProgress acks;
  Asked producer;  // what producer_away() answers, when asked
  DeliveryHold after;
  HoldRound round;
  P change;
  bool held, resumed, defer_due, queue_alert;
  bool asked;  // producer_away() was called
};

TEST(NextHoldTest, EachRowOfTheTable) {
  using H = DeliveryHold;
  using R = HoldRound;
  const HoldRow rows[] = {
      // name, before, was_away, away_since, queue, acks, producer answers,
      // after, round, producer change, held, resumed, defer_due, queue_alert, asked
      {"nobody consumes", H::kNone, false, 0, kDown, kFlowing, Asked::kListening, H::kConsumerDown,
       R::kWait, P::kSame, true, false, false, true, false},
      {"nobody consumes, still", H::kConsumerDown, false, 0, kDown, kStalled, Asked::kListening,
       H::kConsumerDown, R::kWait, P::kSame, false, false, false, true, false},
      {"a stall whose consumer goes", H::kAcksStalled, false, 0, kDown, kStalled, Asked::kListening,
       H::kConsumerDown, R::kWait, P::kSame, true, false, false, true, false},
      {"over the depth", H::kNone, false, 0, kDeep, kFlowing, Asked::kListening, H::kQueueBacklog,
       R::kWait, P::kSame, true, false, false, true, false},
      {"a stall over the depth", H::kAcksStalled, false, 0, kDeep, kStalled, Asked::kListening,
       H::kQueueBacklog, R::kWait, P::kSame, true, false, false, true, false},
      {"under the depth, not held", H::kNone, false, 0, kDraining, kFlowing, Asked::kListening,
       H::kNone, R::kRepublish, P::kSame, false, false, false, false, false},
      {"consumers back, draining", H::kConsumerDown, false, 0, kDraining, kFlowing,
       Asked::kListening, H::kQueueBacklog, R::kWait, P::kSame, true, false, false, true, false},
      {"a backlog draining", H::kQueueBacklog, false, 0, kDraining, kFlowing, Asked::kListening,
       H::kQueueBacklog, R::kWait, P::kSame, false, false, false, true, false},
      {"a backlog drained", H::kQueueBacklog, false, 0, kDrained, kFlowing, Asked::kListening,
       H::kNone, R::kRepublish, P::kSame, false, true, true, false, false},
      {"an outage over, acks stalled", H::kConsumerDown, false, 0, kDrained, kStalled,
       Asked::kListening, H::kNone, R::kRepublish, P::kSame, false, true, true, false, false},
      {"acks stall, producer listening", H::kNone, false, 0, kEmpty, kStalled, Asked::kListening,
       H::kAcksStalled, R::kProbe, P::kSame, true, false, false, false, true},
      {"acks stall, nobody to ask", H::kNone, false, 0, kEmpty, kStalled, Asked::kNo,
       H::kAcksStalled, R::kProbe, P::kSame, true, false, false, false, false},
      {"still stalled", H::kAcksStalled, false, 0, kEmpty, kStalled, Asked::kListening,
       H::kAcksStalled, R::kProbe, P::kSame, false, false, false, false, true},
      {"acks stall, producer away", H::kNone, false, 0, kEmpty, kStalled, Asked::kAway, H::kNone,
       R::kRepublishAway, P::kAway, false, false, false, false, true},
      {"a stall, then the producer away", H::kAcksStalled, false, 0, kDraining, kStalled,
       Asked::kAway, H::kNone, R::kRepublishAway, P::kAway, false, true, true, false, true},
      {"producer away a while", H::kNone, true, kAwayLately, kEmpty, kStalled, Asked::kAway,
       H::kNone, R::kRepublishAway, P::kSame, false, false, false, false, true},
      {"producer away too long", H::kNone, true, kAwayLongAgo, kEmpty, kStalled, Asked::kAway,
       H::kAcksStalled, R::kProbe, P::kSame, true, false, false, false, true},
      {"producer back while stalled", H::kNone, true, kAwayLately, kEmpty, kStalled,
       Asked::kListening, H::kAcksStalled, R::kProbe, P::kBack, true, false, false, false, true},
      {"acks flow, nothing queued", H::kAcksStalled, false, 0, kEmpty, kFlowing, Asked::kListening,
       H::kNone, R::kRepublish, P::kSame, false, true, false, false, false},
      {"acks flow, copies queued", H::kAcksStalled, false, 0, kDraining, kFlowing,
       Asked::kListening, H::kNone, R::kRepublish, P::kSame, false, true, true, false, false},
      {"acks flow", H::kNone, false, 0, kEmpty, kFlowing, Asked::kListening, H::kNone,
       R::kRepublish, P::kSame, false, false, false, false, false},
      {"no ack since it went away", H::kNone, true, 99'950, kEmpty, kFlowing, Asked::kListening,
       H::kNone, R::kRepublishAway, P::kSame, false, false, false, false, false},
      {"an ack since it went away", H::kNone, true, kAwayLately, kEmpty, kFlowing,
       Asked::kListening, H::kNone, R::kRepublish, P::kBack, false, false, false, false, false},
  };
  const RecoveryOptions options = TableOptions();
  const absl::Time now = absl::FromUnixMillis(kNowMs);
  for (const HoldRow& row : rows) {
    SCOPED_TRACE(row.name);
    HoldState state;
    state.hold = row.before;
    state.producer_away = row.was_away;
    state.away_since_ms = row.away_since;
    int asked = 0;
    HoldObservation seen{row.queue, row.acks, now, nullptr};
    if (row.producer != Asked::kNo) {
      seen.producer_away = [&] {
        ++asked;
        return row.producer == Asked::kAway;
      };
    }
    const HoldStep step = NextHold(state, seen, options);
    EXPECT_EQ(step.next.hold, row.after);
    EXPECT_EQ(step.round, row.round);
    EXPECT_EQ(step.producer, row.change);
    EXPECT_EQ(step.held, row.held);
    EXPECT_EQ(step.resumed, row.resumed);
    EXPECT_EQ(step.defer_due, row.defer_due);
    EXPECT_EQ(step.queue_alert, row.queue_alert);
    EXPECT_EQ(asked, row.asked ? 1 : 0);
    EXPECT_EQ(step.next.producer_away,
              row.change == P::kAway || (row.was_away && row.change != P::kBack));
    if (row.change == P::kAway) EXPECT_EQ(step.next.away_since_ms, kNowMs);
  }
}

// A queue hold counts from when it began, through a change of reason; its
// alert is due once it has lasted hold_alert_after.
TEST(NextHoldTest, AQueueHoldsAlertIsDueAfterItsGrace) {
  const RecoveryOptions options = TableOptions();
  const absl::Time began = absl::FromUnixMillis(kNowMs);
  HoldStep step = NextHold({}, {kDown, kFlowing, began, nullptr}, options);
  EXPECT_EQ(step.next.queue_hold_since, began);
  EXPECT_FALSE(step.alert_due);
  step = NextHold(step.next, {kDeep, kFlowing, began + absl::Seconds(29), nullptr}, options);
  EXPECT_EQ(step.next.hold, DeliveryHold::kQueueBacklog);
  EXPECT_EQ(step.next.queue_hold_since, began);
  EXPECT_FALSE(step.alert_due);
  step = NextHold(step.next, {kDown, kFlowing, began + absl::Seconds(30), nullptr}, options);
  EXPECT_TRUE(step.queue_alert);
  EXPECT_TRUE(step.alert_due);
  // Ended, then held again: the grace starts over.
  step = NextHold(step.next, {kEmpty, kFlowing, began + absl::Seconds(31), nullptr}, options);
  EXPECT_EQ(step.next.hold, DeliveryHold::kNone);
  step = NextHold(step.next, {kDown, kFlowing, began + absl::Seconds(32), nullptr}, options);
  EXPECT_EQ(step.next.queue_hold_since, began + absl::Seconds(32));
  EXPECT_FALSE(step.alert_due);
}

RecoveryOptions HoldOptions() {
  RecoveryOptions options;
  options.instance_id = "r1";
  options.watched_queues = {"EVENTS"};
  options.retry.base_delay = absl::Seconds(1);
  options.hold_queue_depth = 100;
  options.hold_alert_after = absl::ZeroDuration();
  return options;
}

class RepublishHoldTest : public ::testing::Test {
 protected:
  RepublishHoldTest() { EXPECT_TRUE(lease_.Keep(clock_.Now()).held); }

  void Due(const std::string& id) {
    outbox_.Add(
        NewOutboxMessage({id, "order", "p-" + id, "EVENTS", "OrderPlaced", "REPLIES", "body"},
                         clock_.NowMillis() - 5'000, options_.retry));
  }

  ManualClock clock_;
  InMemoryOutbox outbox_{clock_};
  RecordingAlerts alerts_;
  MetricsRegistry metrics_;
  const RecoveryOptions options_ = HoldOptions();
  LeaseKeeper lease_{outbox_, metrics_, "r1", absl::Seconds(10)};
  RepublishHold hold_{outbox_, lease_, alerts_, clock_, metrics_, options_};
};

TEST_F(RepublishHoldTest, HeldRowsAreLeftAsTheyAreUnderOneAlert) {
  Due("m1");
  Due("m2");
  const int64_t due_at = outbox_.Row("m1").next_retry_at;
  EXPECT_EQ(hold_.Update({7, 0}), DeliveryHold::kConsumerDown);
  EXPECT_EQ(hold_.Update({7, 0}), DeliveryHold::kConsumerDown);
  EXPECT_EQ(outbox_.Row("m1").next_retry_at, due_at);  // not rewritten
  EXPECT_EQ(hold_.deferred(), 0);
  ASSERT_EQ(alerts_.raised.size(), 1u);
  EXPECT_EQ(alerts_.raised[0].name, "OutboxConsumerDown");
  EXPECT_EQ(alerts_.raised[0].severity, "critical");
  EXPECT_EQ(alerts_.raised[0].annotations.at("rows_waiting"), "2");
  EXPECT_EQ(alerts_.raised[0].annotations.at("depth"), "7");
  EXPECT_EQ(hold_.active_alerts(), 1u);
  EXPECT_EQ(hold_.last_queue().ready, 7);
  EXPECT_NE(metrics_.Render().find("outbox_delivery_held 1"), std::string::npos);
  EXPECT_NE(metrics_.Render().find("outbox_queue_ready{queue=\"EVENTS\"} 7"), std::string::npos);
}

TEST_F(RepublishHoldTest, ABacklogIsAWarningThatChangesNameWhenConsumersGo) {
  Due("m1");
  EXPECT_EQ(hold_.Update({500, 1}), DeliveryHold::kQueueBacklog);
  ASSERT_EQ(alerts_.raised.size(), 1u);
  EXPECT_EQ(alerts_.raised[0].name, "OutboxQueueBacklog");
  EXPECT_EQ(alerts_.raised[0].severity, "warning");
  EXPECT_EQ(hold_.Update({500, 0}), DeliveryHold::kConsumerDown);
  EXPECT_EQ(alerts_.Active("OutboxQueueBacklog"), 0);
  EXPECT_EQ(alerts_.Active("OutboxConsumerDown"), 1);
}

// The backlog's alert says what holds at every depth the hold passes
// through: from over the hold depth down to a tenth of it, and in the
// resolve that ends it.
TEST_F(RepublishHoldTest, TheBacklogAlertIsTrueAtEveryDepthOfTheHold) {
  Due("m1");
  ASSERT_EQ(hold_.Update({500, 1}), DeliveryHold::kQueueBacklog);
  ASSERT_EQ(alerts_.raised.size(), 1u);
  EXPECT_EQ(alerts_.raised[0].annotations.at("summary"),
            "EVENTS holds 500 ready messages: re-publishing is held from over 100 until it is "
            "down to 10 (no attempts spent); 1 outbox rows wait");
  ASSERT_EQ(hold_.Update({53, 1}), DeliveryHold::kQueueBacklog);  // below the depth, still held
  ASSERT_EQ(hold_.Update({10, 1}), DeliveryHold::kNone);          // resumed
  ASSERT_EQ(alerts_.resolved.size(), 1u);
  EXPECT_EQ(alerts_.resolved[0].annotations.at("summary"),
            "EVENTS holds 53 ready messages: re-publishing is held from over 100 until it is "
            "down to 10 (no attempts spent); 1 outbox rows wait");
  EXPECT_EQ(alerts_.resolved[0].annotations.at("depth"), "53");
}

// A consumer reconnecting after a broker restart is no incident: the hold
// starts at once, its alert only once it has lasted hold_alert_after.
TEST(RepublishHoldGraceTest, TheAlertWaitsOutABriefHold) {
  ManualClock clock;
  InMemoryOutbox outbox{clock};
  RecordingAlerts alerts;
  MetricsRegistry metrics;
  RecoveryOptions options = HoldOptions();
  options.hold_alert_after = absl::Seconds(5);
  LeaseKeeper lease{outbox, metrics, "r1", absl::Seconds(10)};
  ASSERT_TRUE(lease.Keep(clock.Now()).held);
  RepublishHold hold{outbox, lease, alerts, clock, metrics, options};
  outbox.Add(NewOutboxMessage({"m1", "order", "p-m1", "EVENTS", "OrderPlaced", "REPLIES", "body"},
                              clock.NowMillis() - 5'000, options.retry));

  EXPECT_EQ(hold.Update({1, 0}), DeliveryHold::kConsumerDown);
  clock.Advance(absl::Seconds(2));
  EXPECT_EQ(hold.Update({1, 0}), DeliveryHold::kConsumerDown);
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(hold.Update({1, 1}), DeliveryHold::kNone);  // back within the grace
  EXPECT_TRUE(alerts.raised.empty());

  EXPECT_EQ(hold.Update({1, 0}), DeliveryHold::kConsumerDown);
  clock.Advance(absl::Seconds(4));
  EXPECT_EQ(hold.Update({1, 0}), DeliveryHold::kConsumerDown);
  EXPECT_TRUE(alerts.raised.empty());
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(hold.Update({1, 0}), DeliveryHold::kConsumerDown);
  ASSERT_EQ(alerts.raised.size(), 1u);
  EXPECT_EQ(alerts.raised[0].name, "OutboxConsumerDown");
}

TEST_F(RepublishHoldTest, NoRowsWaitingMeansNoAlert) {
  EXPECT_EQ(hold_.Update({0, 0}), DeliveryHold::kConsumerDown);
  EXPECT_TRUE(alerts_.raised.empty());
  EXPECT_EQ(hold_.current(), DeliveryHold::kConsumerDown);
}

// A queue without a consumer keeps nothing back from an idle producer: the
// hold is noted at info, and becomes a warning once rows wait behind it.
TEST_F(RepublishHoldTest, AHoldWithNoRowWaitingIsNoWarningUntilRowsWait) {
  std::vector<std::pair<LogLevel, std::string>> held;  // each delivery_held: level, rows_waiting
  SetLogSink([&](const LogRecord& r) {
    if (r.event != "delivery_held") return;
    for (const LogField& f : r.fields) {
      if (f.first == "rows_waiting") held.emplace_back(r.level, f.second);
    }
  });
  EXPECT_EQ(hold_.Update({0, 0}), DeliveryHold::kConsumerDown);
  EXPECT_EQ(hold_.Update({0, 0}), DeliveryHold::kConsumerDown);
  Due("m1");
  EXPECT_EQ(hold_.Update({1, 0}), DeliveryHold::kConsumerDown);
  EXPECT_EQ(hold_.Update({1, 0}), DeliveryHold::kConsumerDown);
  SetLogSink(nullptr);
  using Held = std::pair<LogLevel, std::string>;
  EXPECT_THAT(held,
              ::testing::ElementsAre(Held{LogLevel::kInfo, "0"}, Held{LogLevel::kWarning, "1"}));
}

TEST_F(RepublishHoldTest, WhenTheHoldEndsEveryDueRowGetsOneMoreStepAndTheAlertResolves) {
  Due("m1");
  Due("m2");
  ASSERT_EQ(hold_.Update({2, 0}), DeliveryHold::kConsumerDown);
  EXPECT_EQ(hold_.Update({2, 1}), DeliveryHold::kNone);
  EXPECT_EQ(hold_.current(), DeliveryHold::kNone);
  EXPECT_EQ(hold_.deferred(), 2);
  EXPECT_GT(outbox_.Row("m1").next_retry_at, clock_.NowMillis());
  EXPECT_EQ(outbox_.Row("m1").attempts, 1);  // no attempt spent
  EXPECT_EQ(alerts_.Active("OutboxConsumerDown"), 0);
  EXPECT_NE(metrics_.Render().find("outbox_deferred_total 2"), std::string::npos);
  // Not held before: nothing to defer.
  Due("m3");
  EXPECT_EQ(hold_.Update({0, 1}), DeliveryHold::kNone);
  EXPECT_EQ(hold_.deferred(), 2);
}

TEST_F(RepublishHoldTest, StalledAcknowledgementsHoldWithoutAnAlertAndResumeWithOneMoreStep) {
  Due("m1");
  Due("m2");
  const int64_t due_at = outbox_.Row("m1").next_retry_at;
  const int64_t now = clock_.NowMillis();
  EXPECT_EQ(hold_.Update({40, 1}, {now - 6'000, due_at, now - 5'000}), DeliveryHold::kAcksStalled);
  EXPECT_EQ(outbox_.Row("m1").next_retry_at, due_at);  // not rewritten while held
  EXPECT_TRUE(alerts_.raised.empty());
  EXPECT_NE(metrics_.Render().find("outbox_delivery_held 1"), std::string::npos);
  // An acknowledgement arrives (the probe's, or any) with copies queued:
  // every due row one more step.
  EXPECT_EQ(hold_.Update({40, 1}, {now, due_at, now - 5'000}), DeliveryHold::kNone);
  EXPECT_EQ(hold_.deferred(), 2);
  EXPECT_GT(outbox_.Row("m1").next_retry_at, now);
  EXPECT_EQ(outbox_.Row("m1").attempts, 1);
}

TEST_F(RepublishHoldTest, AfterAStallWithNothingQueuedDueRowsGoOutAtOnce) {
  Due("m1");
  const int64_t due_at = outbox_.Row("m1").next_retry_at;
  const int64_t now = clock_.NowMillis();
  ASSERT_EQ(hold_.Update({0, 1}, {now - 6'000, due_at, now - 5'000}), DeliveryHold::kAcksStalled);
  EXPECT_EQ(hold_.Update({0, 1}, {now, due_at, now - 5'000}), DeliveryHold::kNone);
  EXPECT_EQ(hold_.deferred(), 0);
  EXPECT_EQ(outbox_.Row("m1").next_retry_at, due_at);
}

TEST_F(RepublishHoldTest, AQueueHoldThatEndsResumesAndIsNoStall) {
  Due("m1");
  Due("m2");
  const int64_t now = clock_.NowMillis();
  const AckProgress stalled{now - 9'000, outbox_.Row("m1").next_retry_at, now - 5'000};
  ASSERT_EQ(hold_.Update({2, 0}, stalled), DeliveryHold::kConsumerDown);
  // Consumers back: no acknowledgement yet, since they are only now taking
  // the queued copies. Resumed, rows one step back, and no probe.
  EXPECT_EQ(hold_.Update({2, 1}, stalled), DeliveryHold::kNone);
  EXPECT_EQ(hold_.deferred(), 2);
  EXPECT_GT(outbox_.Row("m1").next_retry_at, now);
}

TEST_F(RepublishHoldTest, AQueueHoldOutranksStalledAcknowledgements) {
  Due("m1");
  const int64_t now = clock_.NowMillis();
  EXPECT_EQ(hold_.Update({3, 0}, {now - 9'000, now - 5'000, now - 6'000}),
            DeliveryHold::kConsumerDown);
  EXPECT_EQ(alerts_.Active("OutboxConsumerDown"), 1);
}

TEST_F(RepublishHoldTest, ALeaseLostWhileDeferringIsNoted) {
  Due("m1");
  ASSERT_EQ(hold_.Update({2, 0}), DeliveryHold::kConsumerDown);
  outbox_.lease = {"other", clock_.NowMillis() + 60'000};
  EXPECT_EQ(hold_.Update({0, 1}), DeliveryHold::kNone);
  EXPECT_FALSE(lease_.held());
  EXPECT_EQ(hold_.deferred(), 0);
  EXPECT_LE(outbox_.Row("m1").next_retry_at, clock_.NowMillis());
}

}  // namespace
}  // namespace outbox
