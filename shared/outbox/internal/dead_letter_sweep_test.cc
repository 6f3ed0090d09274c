#include "shared/outbox/internal/dead_letter_sweep.h"

#include <gtest/gtest.h>

#include <memory>
#include <utility>

#include "shared/outbox/internal/recovery_loop.h"
#include "shared/outbox/internal/state_machine.h"
#include "shared/testing/fakes.h"
#include "shared/testing/manual_clock.h"
#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

using ::outbox::testing::FakePublisher;
using ::outbox::testing::FakeQueueBrowser;
using ::outbox::testing::InMemoryOutbox;
using ::outbox::testing::ManualClock;
using ::outbox::testing::RecordingAlerts;

MessageKeys Keys() {
  auto keys = MessageKeys::Parse("k1 0123456789abcdef0123456789abcdef");
  EXPECT_OK(keys);
  return *std::move(keys);
}

class DeadLetterSweepTest : public ::testing::Test {
 protected:
  DeadLetterSweepTest() {
    options_.instance_id = "r1";
    options_.watched_queues = {"orders"};
    options_.dead_letter_sources = {"orders"};
    options_.idle_sleep = absl::ZeroDuration();
    options_.housekeeping_every = absl::ZeroDuration();
    options_.hold_alert_after = absl::ZeroDuration();
    publisher_.clock = &clock_;
  }

  // A row the producer committed, SENDING.
  void Committed(const std::string& id) {
    outbox_.Add(NewOutboxMessage(
        {id, "order", "o-" + id, "orders", "OrderPlaced", "orders.replies", "body-" + id},
        clock_.NowMillis(), options_.retry));
  }
  // A copy of the row's message the consumer dead-lettered, signed as sent.
  void Parked(const std::string& id, bool forged = false) {
    OutgoingMessage m{"orders", id, "body-" + id, "orders.replies", "OrderPlaced", "", ""};
    Delivery d;
    d.message_id = id;
    d.reply_to = m.reply_to;
    d.type = m.type;
    d.body = forged ? "another body" : m.body;
    d.signature = keys_.Sign(m);
    browser_.queues["orders.DLQ"].push_back(d);
  }
  std::vector<std::string> ParkedIds() {
    std::vector<std::string> ids;
    for (const Delivery& d : browser_.queues["orders.DLQ"]) ids.push_back(d.message_id);
    return ids;
  }
  void Closed(const std::string& id) { ASSERT_OK(outbox_.RecordAcks({id})); }

  ManualClock clock_;
  MessageKeys keys_ = Keys();
  InMemoryOutbox outbox_{clock_};
  FakeQueueBrowser browser_;
  FakePublisher publisher_;
  RecordingAlerts alerts_;
  MetricsRegistry metrics_;
  RecoveryOptions options_;
  std::vector<std::pair<std::string, int64_t>> removed_;  // what `removed` was told
  DeadLetters dead_letters_{browser_, {{"orders", "shop.orders"}}};
  DeadLetterSweep::Removed record_removal_ = [this](const std::string& id, int64_t at) {
    removed_.push_back({id, at});
  };
  DeadLetterSweep sweep_{dead_letters_, &keys_,   outbox_,          record_removal_,
                         clock_,        metrics_, {{"orders"}, 100}};
};

TEST_F(DeadLetterSweepTest, RemovesOnlyCopiesOfBookedMessagesAndKeepsTheRestInOrder) {
  for (const char* id : {"m1", "m2", "m3"}) Committed(id);
  Closed("m2");
  Parked("m1");
  Parked("m2");
  Parked("m3");
  Parked("m9");  // no row: kept
  EXPECT_EQ(sweep_.Run(), 1);
  EXPECT_EQ(ParkedIds(), (std::vector<std::string>{"m1", "m3", "m9"}));
  ASSERT_EQ(removed_.size(), 1u);
  EXPECT_EQ(removed_[0].first, "m2");
  EXPECT_EQ(removed_[0].second, clock_.NowMillis());
  EXPECT_NE(
      metrics_.Render().find("outbox_dead_letters_settled_removed_total{queue=\"orders.DLQ\"} 1"),
      std::string::npos)
      << metrics_.Render();
}

TEST_F(DeadLetterSweepTest, AForgedCopyOfABookedMessageIsKept) {
  Committed("m1");
  Closed("m1");
  Parked("m1", /*forged=*/true);
  EXPECT_EQ(sweep_.Run(), 0);
  EXPECT_EQ(ParkedIds(), (std::vector<std::string>{"m1"}));
  EXPECT_TRUE(removed_.empty());
}

TEST_F(DeadLetterSweepTest, LooksAtMostPerPassMessagesPerQueue) {
  DeadLetterSweep small(dead_letters_, &keys_, outbox_, nullptr, clock_, metrics_, {{"orders"}, 2});
  for (const char* id : {"m1", "m2", "m3"}) {
    Committed(id);
    Closed(id);
    Parked(id);
  }
  EXPECT_EQ(small.Run(), 2);
  EXPECT_EQ(ParkedIds(), (std::vector<std::string>{"m3"}));
  EXPECT_EQ(small.Run(), 1);
  EXPECT_TRUE(ParkedIds().empty());
}

// The connection dies after two removals: those two are gone from the
// queue, so they are counted and handed on (the audit trail) all the same.
TEST_F(DeadLetterSweepTest, WhatWasRemovedBeforeAnErrorIsRecorded) {
  for (const char* id : {"m1", "m2", "m3"}) {
    Committed(id);
    Closed(id);
    Parked(id);
  }
  browser_.fail_take = 3;
  EXPECT_EQ(sweep_.Run(), 2);
  EXPECT_EQ(ParkedIds(), (std::vector<std::string>{"m3"}));
  ASSERT_EQ(removed_.size(), 2u);
  EXPECT_EQ(removed_[0].first, "m1");
  EXPECT_EQ(removed_[1].first, "m2");
  EXPECT_NE(
      metrics_.Render().find("outbox_dead_letters_settled_removed_total{queue=\"orders.DLQ\"} 2"),
      std::string::npos)
      << metrics_.Render();
  EXPECT_EQ(sweep_.Run(), 1);  // the next pass, on a new connection, takes the rest
  EXPECT_TRUE(ParkedIds().empty());
}

TEST_F(DeadLetterSweepTest, AMissingDeadLetterQueueIsNothingToDo) {
  browser_.missing = {"orders.DLQ"};
  EXPECT_EQ(sweep_.Run(), 0);
}

// The recovery loop runs the sweep in its housekeeping: once the message of
// a dead letter is booked the alert resolves with no purge, while a copy not
// booked keeps it firing.
TEST_F(DeadLetterSweepTest, TheAlertResolvesOnceEveryParkedMessageIsBooked) {
  Committed("m1");
  Committed("m2");
  Parked("m1");
  Parked("m2");
  RecoveryLoop worker(outbox_, publisher_, alerts_, clock_, metrics_, options_);
  worker.AddHousekeeping([&] {
    sweep_.Run();
    // Both connections see one broker: the alert reads the depth the sweep left.
    publisher_.queues["orders.DLQ"] = {static_cast<int64_t>(browser_.queues["orders.DLQ"].size()),
                                       0};
  });
  worker.Step();  // connects the publisher: the next housekeeping sees the queue
  worker.Step();
  EXPECT_EQ(ParkedIds(), (std::vector<std::string>{"m1", "m2"}));
  EXPECT_EQ(alerts_.Active("OutboxDeadLetters"), 1);

  Closed("m1");  // its re-published copy was booked
  worker.Step();
  EXPECT_EQ(ParkedIds(), (std::vector<std::string>{"m2"}));
  EXPECT_EQ(alerts_.Active("OutboxDeadLetters"), 1);  // m2 still matters

  Closed("m2");
  worker.Step();
  EXPECT_TRUE(ParkedIds().empty());
  EXPECT_EQ(alerts_.Active("OutboxDeadLetters"), 0);
}

}  // namespace
}  // namespace outbox
