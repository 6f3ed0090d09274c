#include "shared/outbox/internal/dead_letters.h"

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <utility>

#include "shared/base/internal/mutex.h"
#include "shared/testing/fakes.h"
#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

using ::outbox::testing::FakeQueueBrowser;

Delivery Parked(const std::string& id) {
  Delivery d;
  d.message_id = id;
  d.type = "OrderPlaced";
  d.signature = "k1:sig-" + id;
  d.body = "body-" + id;
  return d;
}

class DeadLettersTest : public ::testing::Test {
 protected:
  void Park(const std::string& queue, std::initializer_list<const char*> ids) {
    for (const char* id : ids) broker_.queues[queue + ".DLQ"].push_back(Parked(id));
  }
  std::vector<std::string> ParkedIds(const std::string& queue) {
    std::vector<std::string> ids;
    for (const Delivery& d : broker_.queues[queue + ".DLQ"]) ids.push_back(d.message_id);
    return ids;
  }

  FakeQueueBrowser broker_;
  DeadLetters dead_letters_{broker_,
                            {{"orders", "shop.orders"}, {"orders.replies", "shop.replies"}}};
};

TEST_F(DeadLettersTest, PeekShowsParkedMessagesAndLeavesThemInOrder) {
  Park("orders", {"m1", "m2", "m3"});
  auto peek = dead_letters_.Peek("orders", 2);
  ASSERT_OK(peek);
  EXPECT_EQ(peek->total, 3);
  ASSERT_EQ(peek->messages.size(), 2u);
  EXPECT_EQ(peek->messages[0].message_id, "m1");
  EXPECT_EQ(peek->messages[1].body, "body-m2");
  EXPECT_EQ(ParkedIds("orders"), (std::vector<std::string>{"m1", "m2", "m3"}));
  EXPECT_TRUE(broker_.acked.empty());
  EXPECT_TRUE(broker_.published.empty());
}

TEST_F(DeadLettersTest, CountIsPeeksTotal) {
  Park("orders", {"m1", "m2", "m3"});
  auto count = dead_letters_.Count("orders");
  ASSERT_OK(count);
  EXPECT_EQ(*count, 3);
  EXPECT_EQ(ParkedIds("orders"), (std::vector<std::string>{"m1", "m2", "m3"}));
  broker_.missing = {"orders.replies.DLQ"};
  EXPECT_THAT(dead_letters_.Count("orders.replies"),
              testing::StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(dead_letters_.Count("OTHER"), testing::StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST_F(DeadLettersTest, OnlyTheConfiguredQueuesAndTheirDeclaredDeadLetterQueues) {
  auto unknown = dead_letters_.Peek("OTHER", 10);
  EXPECT_TRUE(absl::IsInvalidArgument(unknown.status()));
  EXPECT_NE(unknown.status().message().find("'orders', 'orders.replies'"), std::string::npos);
  EXPECT_TRUE(absl::IsInvalidArgument(dead_letters_.Redrive("OTHER", 0).status));
  broker_.missing = {"orders.replies.DLQ"};
  EXPECT_TRUE(absl::IsNotFound(dead_letters_.Peek("orders.replies", 10).status()));
  EXPECT_TRUE(broker_.resets.empty());  // the connection is fine
}

TEST_F(DeadLettersTest, RedriveSendsEachMessageAsItCameThroughItsExchangeThenAcksIt) {
  Park("orders.replies", {"a1", "a2"});
  const DeadLettersRedriven moved = dead_letters_.Redrive("orders.replies", 0);
  ASSERT_OK(moved.status);
  EXPECT_EQ(moved.moved, 2);
  ASSERT_EQ(broker_.published.size(), 2u);
  EXPECT_EQ(broker_.published[0].first, "shop.replies");
  EXPECT_EQ(broker_.published[0].second.topic, "orders.replies");
  EXPECT_EQ(broker_.published[0].second.message_id, "a1");
  EXPECT_EQ(broker_.published[0].second.signature, "k1:sig-a1");  // never re-signed
  EXPECT_EQ(broker_.acked.size(), 2u);
  EXPECT_TRUE(ParkedIds("orders.replies").empty());
}

TEST_F(DeadLettersTest, RedriveTakesAtMostTheLimitAndOnlyWhatIsParkedNow) {
  Park("orders", {"m1", "m2", "m3"});
  EXPECT_EQ(dead_letters_.Redrive("orders", 1).moved, 1);
  EXPECT_EQ(ParkedIds("orders"), (std::vector<std::string>{"m2", "m3"}));
  // Each message fails again and comes straight back: still one pass only.
  broker_.answer = [this](const std::string&, const OutgoingMessage& m) {
    broker_.queues["orders.DLQ"].push_back(Parked(m.message_id));
    return true;
  };
  EXPECT_EQ(dead_letters_.Redrive("orders", 0).moved, 2);
  EXPECT_EQ(ParkedIds("orders"), (std::vector<std::string>{"m2", "m3"}));
}

TEST_F(DeadLettersTest, AnUnconfirmedRedriveFailsAndLeavesTheMessageParked) {
  Park("orders", {"m1", "m2"});
  broker_.answer = [](const std::string&, const OutgoingMessage&) { return false; };
  const DeadLettersRedriven moved = dead_letters_.Redrive("orders", 0);
  EXPECT_TRUE(absl::IsUnavailable(moved.status)) << moved.status;
  EXPECT_EQ(moved.moved, 0);
  EXPECT_TRUE(broker_.acked.empty());
  EXPECT_EQ(ParkedIds("orders"), (std::vector<std::string>{"m1", "m2"}));
  ASSERT_EQ(broker_.resets.size(), 1u);
}

TEST_F(DeadLettersTest, AConnectionClosedWhileIdleIsReplacedOnce) {
  Park("orders", {"m1"});
  ASSERT_OK(dead_letters_.Peek("orders", 1));
  broker_.Drop();  // the broker closed it between two operator calls
  auto peek = dead_letters_.Peek("orders", 1);
  ASSERT_OK(peek);
  EXPECT_EQ(peek->total, 1);
  EXPECT_EQ(broker_.resets.size(), 1u);
  EXPECT_EQ(broker_.connects, 2);
}

TEST_F(DeadLettersTest, ABrokerThatCannotBeReachedIsUnavailable) {
  broker_.reachable = false;
  EXPECT_TRUE(absl::IsUnavailable(dead_letters_.Peek("orders", 1).status()));
  EXPECT_TRUE(absl::IsUnavailable(dead_letters_.Redrive("orders", 0).status));
}

TEST_F(DeadLettersTest, ARedriveThatStopsHalfwayReturnsWhatItMoved) {
  Park("orders", {"m1", "m2", "m3", "m4"});
  broker_.fail_ack = 3;  // the connection dies at the third ack
  const DeadLettersRedriven moved = dead_letters_.Redrive("orders", 0);
  EXPECT_TRUE(absl::IsUnavailable(moved.status)) << moved.status;
  EXPECT_EQ(moved.moved, 2);
  EXPECT_EQ(broker_.published.size(), 3u);  // m3 went out and stays parked: a duplicate
  EXPECT_EQ(ParkedIds("orders"), (std::vector<std::string>{"m3", "m4"}));
}

TEST_F(DeadLettersTest, ARemovalThatStopsHalfwayReturnsWhatItRemoved) {
  Park("orders", {"m1", "keep", "m2", "m3", "m4"});
  broker_.fail_take = 4;  // after m1 and m2 were removed and "keep" kept
  const DeadLettersRemoved removed = dead_letters_.RemoveSettled(
      "orders", 100, [](const Delivery& d) { return d.message_id != "keep"; });
  EXPECT_TRUE(absl::IsUnavailable(removed.status)) << removed.status;
  EXPECT_EQ(removed.message_ids, (std::vector<std::string>{"m1", "m2"}));
  EXPECT_EQ(ParkedIds("orders"), (std::vector<std::string>{"keep", "m3", "m4"}));
}

// Between calls a thread of its own polls the connection, so that it keeps
// its heartbeats while idle (the broker closes a silent one).
TEST_F(DeadLettersTest, KeepAlivePollsTheConnectionBetweenCalls) {
  DeadLetters kept(broker_, {{"orders", "shop.orders"}});
  kept.KeepAlive(absl::Milliseconds(30));
  ASSERT_OK(kept.Peek("orders", 1));  // connects, and polls once
  const int after_call = broker_.polls.load();
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (broker_.polls.load() < after_call + 3 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_GE(broker_.polls.load(), after_call + 3);
}

TEST_F(DeadLettersTest, TheConnectionIsCountedAsDeadLetters) {
  MetricsRegistry metrics;
  dead_letters_.RegisterMetrics(metrics);
  EXPECT_NE(metrics.Render().find("outbox_amqp_connected{connection=\"dead_letters\"} 0"),
            std::string::npos);
  ASSERT_OK(dead_letters_.Peek("orders", 1));
  EXPECT_NE(metrics.Render().find("outbox_amqp_connected{connection=\"dead_letters\"} 1"),
            std::string::npos);
}

// Another process (its own DeadLetters, on its own connection to the same
// broker) in the middle of a pass over orders.DLQ: it has taken the first
// message and not given it back yet, so the broker does not count it ready.
class DeadLettersOfTwoProcessesTest : public DeadLettersTest {
 protected:
  void TearDown() override { Resume(); }

  // Starts the other process's sweep (it keeps every message), in a thread
  // of its own, and returns once that sweep holds the first message.
  void StartOtherSweep() {
    other_broker_->on_take = [this](const Delivery&) {
      if (taken_.HasBeenNotified()) return;
      taken_.Notify();
      resume_.WaitForNotification();
    };
    other_thread_ = std::thread([this] {
      other_removed_ = other_.RemoveSettled("orders", 100, [](const Delivery&) { return false; });
    });
    taken_.WaitForNotification();
  }
  // Lets the other sweep finish, and waits for it.
  void Resume() {
    if (!resume_.HasBeenNotified()) resume_.Notify();
    if (other_thread_.joinable()) other_thread_.join();
  }
  // Runs `call` (on this process's connection) in a thread of its own while
  // the other sweep holds the first message; lets the sweep finish once
  // `call` has found the queue's lock held, or has returned.
  void WhileTheOtherHolds(const std::function<void()>& call) {
    StartOtherSweep();
    std::atomic<bool> done{false};
    std::thread mine([&] {
      call();
      done = true;
    });
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (mine_->lock_refusals.load() == 0 && !done && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    Resume();
    mine.join();
    ASSERT_OK(other_removed_.status);
  }

  std::unique_ptr<FakeQueueBrowser> other_broker_ = FakeQueueBrowser::OnSameBroker(broker_);
  DeadLetters other_{*other_broker_, {{"orders", "shop.orders"}}};
  std::unique_ptr<FakeQueueBrowser> mine_ = FakeQueueBrowser::OnSameBroker(broker_);
  // Waits as long as a slow machine may need.
  DeadLetters patient_{*mine_, {{"orders", "shop.orders"}}, absl::Minutes(1)};
  Notification taken_, resume_;
  std::thread other_thread_;
  DeadLettersRemoved other_removed_;
};

TEST_F(DeadLettersOfTwoProcessesTest, AListingWaitsForTheOthersPassAndCountsWhatItHeld) {
  Park("orders", {"m1", "m2", "m3"});
  absl::StatusOr<DeadLetterPeek> peek;
  WhileTheOtherHolds([&] { peek = patient_.Peek("orders", 10); });
  ASSERT_OK(peek);
  EXPECT_EQ(peek->total, 3);
  ASSERT_EQ(peek->messages.size(), 3u);
  EXPECT_EQ(peek->messages[0].message_id, "m1");
  EXPECT_GT(mine_->lock_refusals.load(), 0);  // it waited
  EXPECT_EQ(ParkedIds("orders"), (std::vector<std::string>{"m1", "m2", "m3"}));
}

TEST_F(DeadLettersOfTwoProcessesTest, ACountWaitsForTheOthersPassAndCountsWhatItHeld) {
  Park("orders", {"m1", "m2"});
  absl::StatusOr<int64_t> count;
  WhileTheOtherHolds([&] { count = patient_.Count("orders"); });
  ASSERT_OK(count);
  EXPECT_EQ(*count, 2);
}

TEST_F(DeadLettersOfTwoProcessesTest, ARedriveWaitsForTheOthersPassAndMovesEveryMessage) {
  Park("orders", {"m1", "m2"});
  DeadLettersRedriven moved;
  WhileTheOtherHolds([&] { moved = patient_.Redrive("orders", 0); });
  ASSERT_OK(moved.status);
  EXPECT_EQ(moved.moved, 2);
  EXPECT_EQ(mine_->published.size(), 2u);
  EXPECT_TRUE(ParkedIds("orders").empty());
}

TEST_F(DeadLettersOfTwoProcessesTest, ASweepWaitsForTheOthersPassAndRemovesWhatItHeld) {
  Park("orders", {"m1"});
  DeadLettersRemoved removed;
  WhileTheOtherHolds([&] {
    removed = patient_.RemoveSettled("orders", 100, [](const Delivery&) { return true; });
  });
  ASSERT_OK(removed.status);
  EXPECT_EQ(removed.message_ids, (std::vector<std::string>{"m1"}));
  EXPECT_TRUE(ParkedIds("orders").empty());
}

TEST_F(DeadLettersOfTwoProcessesTest, PastTheWaitACallIsUnavailableNeverAnEmptyQueue) {
  Park("orders", {"m1"});
  DeadLetters hasty(*mine_, {{"orders", "shop.orders"}}, absl::ZeroDuration());
  absl::StatusOr<DeadLetterPeek> peek;
  DeadLettersRedriven moved;
  DeadLettersRemoved removed;
  // Each asked while the other's pass holds m1 (in that pass, right after its take).
  bool asked = false;
  other_broker_->on_take = [&](const Delivery&) {
    if (std::exchange(asked, true)) return;
    peek = hasty.Peek("orders", 10);
    moved = hasty.Redrive("orders", 0);
    removed = hasty.RemoveSettled("orders", 10, [](const Delivery&) { return true; });
  };
  ASSERT_OK(other_.Peek("orders", 10));
  ASSERT_TRUE(asked);
  EXPECT_THAT(peek.status(), testing::StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(peek.status().message(),
            "dead-letter queue orders.DLQ is being read by another process; try again");
  EXPECT_TRUE(absl::IsUnavailable(moved.status)) << moved.status;
  EXPECT_EQ(moved.moved, 0);
  EXPECT_TRUE(absl::IsUnavailable(removed.status)) << removed.status;
  EXPECT_TRUE(removed.message_ids.empty());
  EXPECT_TRUE(mine_->published.empty());
  EXPECT_TRUE(mine_->resets.empty());  // the connection is fine
  // The other's pass over, the lock is free.
  auto after = hasty.Peek("orders", 10);
  ASSERT_OK(after);
  EXPECT_EQ(after->total, 1);
}

}  // namespace
}  // namespace outbox
