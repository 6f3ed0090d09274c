#pragma once

// The contract of the broker seam (shared/outbox/transport.h): one suite run
// against the fakes (FakePublisher, FakeConsumer, FakeQueueBrowser) and
// against the AMQP adapters on a real broker, so that the fakes the workers'
// tests use behave as the broker does where the workers depend on it:
// confirms and returns, what a delivery carries, the order requeued and
// reset deliveries come back in, dead letters, browsing a queue, and the
// browsers' lock on a queue across connections.
//
// Include this header in exactly one .cc of a test binary (it defines the
// TEST_Ps) and instantiate the suite there for each implementation:
//
//   INSTANTIATE_TEST_SUITE_P(Fakes, BrokerContractTest,
//                            ::testing::Values(BrokerImpl{"Fakes", MakeFakeBroker}),
//                            BrokerImplName);
//
// An implementation is a factory of a BrokerUnderTest: its links, a
// queue of the test's own, and (for fakes) what the broker does between them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "shared/outbox/transport.h"
#include "shared/testing/fakes.h"
#include "shared/testing/status_matchers.h"

namespace outbox::testing {

struct BrokerUnderTest {
  // Publishes to `queue` with the queue's name as its topic, declaring the
  // queue (and its dead-letter queue) when it connects, as a producer does.
  MessagePublisher* publisher = nullptr;
  MessageConsumer* consumer = nullptr;    // consumes `queue`
  QueueBrowser* browser = nullptr;        // browses any queue; publishes through exchange ""
  QueueBrowser* other_browser = nullptr;  // another connection browsing, as another process's
  std::string queue;                      // unique to the test
  std::string unrouted_topic;             // no queue is bound to it
  std::string missing_queue;              // does not exist
  // What the broker does between the links (routing published messages,
  // dead-lettering rejected ones); the suite calls it before each read. A
  // real broker needs none.
  std::function<void()> route;
  std::shared_ptr<void> owner;  // keeps the links (and their connections) alive
};

struct BrokerImpl {
  std::string name;
  std::function<BrokerUnderTest()> make;
};

inline void PrintTo(const BrokerImpl& impl, std::ostream* os) {
  *os << impl.name;
}

inline std::string BrokerImplName(const ::testing::TestParamInfo<BrokerImpl>& info) {
  return info.param.name;
}

// The fakes with a broker between them: what FakePublisher and
// FakeQueueBrowser publish to the queue reaches FakeConsumer, to a
// dead-letter queue the browser's queues; what FakeConsumer rejects lands in
// the browser's dead-letter queue; other topics are returned.
struct FakeBroker {
  FakePublisher publisher;
  FakeConsumer consumer;
  FakeQueueBrowser browser;
  std::unique_ptr<FakeQueueBrowser> other_browser = FakeQueueBrowser::OnSameBroker(browser);
  std::string queue = "contract";
  size_t published = 0, browsed = 0, dead = 0;  // how far each was routed

  void Route() {
    auto deliver = [this](const OutgoingMessage& m) {
      if (m.topic == queue) {
        consumer.Push(DeliveryOf(m));
      } else {
        browser.queues[m.topic].push_back(DeliveryOf(m));
      }
    };
    for (; published < publisher.published.size(); ++published) {
      deliver(publisher.published[published]);
    }
    for (; browsed < browser.published.size(); ++browsed)
      deliver(browser.published[browsed].second);
    for (; dead < consumer.dead_lettered.size(); ++dead) {
      Delivery d = consumer.dead_lettered[dead];
      d.delivery_tag = 0;
      d.redelivered = false;
      browser.queues[DeadLetterQueueOf(queue)].push_back(d);
    }
    publisher.queues[queue] = {static_cast<int64_t>(consumer.ready()),
                               consumer.connected() ? 1 : 0};
  }
};

inline BrokerUnderTest MakeFakeBroker() {
  auto fakes = std::make_shared<FakeBroker>();
  const std::string queue = fakes->queue;
  const std::string dlq = DeadLetterQueueOf(queue);
  fakes->publisher.answer = [queue](const OutgoingMessage& m) {
    return m.topic == queue ? FakePublisher::Answer::kAck : FakePublisher::Answer::kReturn;
  };
  fakes->browser.answer = [queue, dlq](const std::string& exchange, const OutgoingMessage& m) {
    return exchange.empty() && (m.topic == queue || m.topic == dlq);
  };
  fakes->publisher.missing = {"contract.missing"};
  fakes->browser.missing = {"contract.missing"};
  BrokerUnderTest b;
  b.publisher = &fakes->publisher;
  b.consumer = &fakes->consumer;
  b.browser = &fakes->browser;
  b.other_browser = fakes->other_browser.get();
  b.queue = queue;
  b.unrouted_topic = "contract.nowhere";
  b.missing_queue = "contract.missing";
  b.route = [fakes] { fakes->Route(); };
  b.owner = fakes;
  return b;
}

class BrokerContractTest : public ::testing::TestWithParam<BrokerImpl> {
 protected:
  // How long a real broker may take to pass a message on.
  static constexpr absl::Duration kPatience = absl::Seconds(10);

  void SetUp() override {
    b_ = GetParam().make();
    ASSERT_NE(b_.publisher, nullptr);
    ASSERT_OK(b_.publisher->Connect());  // declares the queue
  }

  void Route() {
    if (b_.route) b_.route();
  }

  // A message to the test's queue carrying every field a delivery reports.
  OutgoingMessage Message(const std::string& id) const {
    OutgoingMessage m;
    m.topic = b_.queue;
    m.message_id = id;
    m.body = "body of " + id;
    m.reply_to = "replies";
    m.type = "ContractEvent";
    m.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    m.signature = "k1:c2lnbmF0dXJl";
    m.shard_key = "key-" + id;
    return m;
  }

  // Publishes each message and waits for all their confirms; their tags.
  std::vector<uint64_t> PublishConfirmed(const std::vector<OutgoingMessage>& messages) {
    std::vector<uint64_t> tags;
    for (const OutgoingMessage& m : messages) {
      auto tag = b_.publisher->Publish(m);
      EXPECT_OK(tag);
      if (tag.ok()) tags.push_back(*tag);
    }
    std::vector<Confirm> confirms = Confirms(tags.size());
    EXPECT_EQ(confirms.size(), tags.size());
    for (const Confirm& c : confirms) EXPECT_TRUE(c.ok) << "tag " << c.tag;
    return tags;
  }

  // Confirms until `n` have come or kPatience has passed.
  std::vector<Confirm> Confirms(size_t n) {
    std::vector<Confirm> settled;
    const absl::Time deadline = absl::Now() + kPatience;
    while (settled.size() < n && absl::Now() < deadline) {
      EXPECT_OK(b_.publisher->ReadConfirms(absl::Milliseconds(100), &settled));
    }
    return settled;
  }

  // Deliveries until `n` have come or kPatience has passed.
  std::vector<Delivery> Receive(size_t n) {
    std::vector<Delivery> got;
    const absl::Time deadline = absl::Now() + kPatience;
    while (got.size() < n && absl::Now() < deadline) {
      Route();
      auto batch = b_.consumer->Next(n - got.size(), absl::Milliseconds(100));
      EXPECT_OK(batch);
      if (!batch.ok()) break;
      EXPECT_LE(batch->size(), n - got.size());
      got.insert(got.end(), batch->begin(), batch->end());
    }
    return got;
  }

  // Takes from `queue` until a message comes or kPatience has passed (tag 0).
  Delivery TakeOne(const std::string& queue) {
    const absl::Time deadline = absl::Now() + kPatience;
    while (true) {
      Route();
      auto d = b_.browser->Take(queue);
      EXPECT_OK(d);
      if (!d.ok() || d->delivery_tag != 0 || absl::Now() >= deadline)
        return d.ok() ? *d : Delivery{};
      absl::SleepFor(absl::Milliseconds(50));
    }
  }

  // Inspects `queue` until it has `ready` messages or kPatience has passed.
  int64_t ReadyIn(const std::string& queue, int64_t ready) {
    const absl::Time deadline = absl::Now() + kPatience;
    while (true) {
      Route();
      auto state = b_.browser->Inspect(queue);
      EXPECT_OK(state);
      if (!state.ok()) return -1;
      if (state->ready == ready || absl::Now() >= deadline) return state->ready;
      absl::SleepFor(absl::Milliseconds(50));
    }
  }

  // Whether `browser` holds the lock on `queue` now (TryLock).
  static bool Locks(QueueBrowser& browser, const std::string& queue) {
    auto locked = browser.TryLock(queue);
    EXPECT_OK(locked);
    return locked.ok() && *locked;
  }

  static std::vector<std::string> Ids(const std::vector<Delivery>& ds) {
    std::vector<std::string> ids;
    for (const Delivery& d : ds) ids.push_back(d.message_id);
    return ids;
  }

  BrokerUnderTest b_;
};

TEST_P(BrokerContractTest, EveryPublishIsConfirmedUnderItsOwnRisingTag) {
  std::vector<uint64_t> tags = PublishConfirmed({Message("a"), Message("b"), Message("c")});
  ASSERT_EQ(tags.size(), 3u);
  EXPECT_LT(tags[0], tags[1]);
  EXPECT_LT(tags[1], tags[2]);
}

TEST_P(BrokerContractTest, AConfirmNamesItsTagAndAnUnroutableMessageIsReturned) {
  OutgoingMessage lost = Message("lost");
  lost.topic = b_.unrouted_topic;
  auto routed = b_.publisher->Publish(Message("routed"));
  auto unrouted = b_.publisher->Publish(lost);
  ASSERT_OK(routed);
  ASSERT_OK(unrouted);
  std::vector<Confirm> confirms = Confirms(2);
  ASSERT_EQ(confirms.size(), 2u);
  for (const Confirm& c : confirms) {
    if (c.tag == *routed) {
      EXPECT_TRUE(c.ok);
      EXPECT_FALSE(c.unroutable);
    } else {
      EXPECT_EQ(c.tag, *unrouted);
      EXPECT_FALSE(c.ok);
      EXPECT_TRUE(c.unroutable);
    }
  }
}

TEST_P(BrokerContractTest, ADeliveryCarriesWhatWasPublished) {
  ASSERT_OK(b_.consumer->Connect());
  const OutgoingMessage sent = Message("m-1");
  PublishConfirmed({sent});
  std::vector<Delivery> got = Receive(1);
  ASSERT_EQ(got.size(), 1u);
  const Delivery& d = got[0];
  EXPECT_NE(d.delivery_tag, 0u);
  EXPECT_EQ(d.message_id, sent.message_id);
  EXPECT_EQ(d.body, sent.body);
  EXPECT_EQ(d.reply_to, sent.reply_to);
  EXPECT_EQ(d.type, sent.type);
  EXPECT_EQ(d.traceparent, sent.traceparent);
  EXPECT_EQ(d.signature, sent.signature);
  EXPECT_EQ(d.shard_key, sent.shard_key);
  EXPECT_FALSE(d.redelivered);
  EXPECT_OK(b_.consumer->Ack(d.delivery_tag, false));
}

TEST_P(BrokerContractTest, DeliveriesComeInOrderAndNothingMoreOnceAcked) {
  ASSERT_OK(b_.consumer->Connect());
  PublishConfirmed({Message("a"), Message("b"), Message("c")});
  std::vector<Delivery> got = Receive(3);
  EXPECT_THAT(Ids(got), ::testing::ElementsAre("a", "b", "c"));
  ASSERT_EQ(got.size(), 3u);
  EXPECT_OK(b_.consumer->Ack(got[2].delivery_tag, /*multiple=*/true));
  Route();
  auto more = b_.consumer->Next(10, absl::Milliseconds(300));
  ASSERT_OK(more);
  EXPECT_THAT(*more, ::testing::IsEmpty());
}

TEST_P(BrokerContractTest, RequeuedDeliveriesComeAgainInTheirQueueOrderMarkedRedelivered) {
  ASSERT_OK(b_.consumer->Connect());
  PublishConfirmed({Message("a"), Message("b"), Message("c")});
  std::vector<Delivery> got = Receive(3);
  ASSERT_EQ(got.size(), 3u);
  // One at a time, the first first: each goes back to its place in the queue.
  EXPECT_OK(b_.consumer->Requeue(got[0].delivery_tag, false));
  EXPECT_OK(b_.consumer->Requeue(got[1].delivery_tag, false));
  std::vector<Delivery> again = Receive(2);
  EXPECT_THAT(Ids(again), ::testing::ElementsAre("a", "b"));
  for (const Delivery& d : again) {
    EXPECT_TRUE(d.redelivered) << d.message_id;
    EXPECT_NE(d.delivery_tag, got[0].delivery_tag);
    EXPECT_NE(d.delivery_tag, got[1].delivery_tag);
  }
  EXPECT_OK(b_.consumer->Ack(got[2].delivery_tag, false));
  for (const Delivery& d : again) EXPECT_OK(b_.consumer->Ack(d.delivery_tag, false));
}

TEST_P(BrokerContractTest, AfterAResetTheUnackedDeliveriesComeAgainInOrder) {
  ASSERT_OK(b_.consumer->Connect());
  PublishConfirmed({Message("a"), Message("b"), Message("c")});
  std::vector<Delivery> got = Receive(3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_OK(b_.consumer->Ack(got[1].delivery_tag, false));
  b_.consumer->Reset(absl::UnavailableError("the test drops the connection"));
  EXPECT_FALSE(b_.consumer->connected());
  ASSERT_OK(b_.consumer->Connect());
  std::vector<Delivery> again = Receive(2);
  EXPECT_THAT(Ids(again), ::testing::ElementsAre("a", "c"));
  for (const Delivery& d : again) EXPECT_TRUE(d.redelivered) << d.message_id;
}

TEST_P(BrokerContractTest, ARejectedDeliveryIsDeadLettered) {
  ASSERT_OK(b_.consumer->Connect());
  ASSERT_OK(b_.browser->Connect());
  PublishConfirmed({Message("bad")});
  std::vector<Delivery> got = Receive(1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_OK(b_.consumer->Reject(got[0].delivery_tag));
  Delivery dead = TakeOne(DeadLetterQueueOf(b_.queue));
  EXPECT_NE(dead.delivery_tag, 0u);
  EXPECT_EQ(dead.message_id, "bad");
  EXPECT_EQ(dead.body, "body of bad");
  EXPECT_OK(b_.browser->Ack(dead.delivery_tag));
  EXPECT_EQ(ReadyIn(DeadLetterQueueOf(b_.queue), 0), 0);
}

TEST_P(BrokerContractTest, ABrowsedQueueKeepsItsOrderThroughRequeues) {
  ASSERT_OK(b_.browser->Connect());
  const std::string dlq = DeadLetterQueueOf(b_.queue);
  for (const char* id : {"a", "b", "c"}) {
    OutgoingMessage m = Message(id);
    m.topic = dlq;
    auto confirmed = b_.browser->PublishConfirmed("", m, kPatience);
    ASSERT_OK(confirmed);
    EXPECT_TRUE(*confirmed) << id;
  }
  EXPECT_EQ(ReadyIn(dlq, 3), 3);
  Delivery a = TakeOne(dlq), b = TakeOne(dlq), c = TakeOne(dlq);
  EXPECT_EQ(a.message_id, "a");
  EXPECT_EQ(b.message_id, "b");
  EXPECT_EQ(c.message_id, "c");
  EXPECT_EQ(ReadyIn(dlq, 0), 0);  // taken, unacked: not ready
  // One at a time, the first first: each goes back to its place.
  EXPECT_OK(b_.browser->Requeue(a.delivery_tag, false));
  EXPECT_OK(b_.browser->Requeue(b.delivery_tag, false));
  EXPECT_OK(b_.browser->Ack(c.delivery_tag));
  EXPECT_EQ(ReadyIn(dlq, 2), 2);
  Delivery first = TakeOne(dlq);
  EXPECT_EQ(first.message_id, "a");
  EXPECT_TRUE(first.redelivered);
  EXPECT_EQ(TakeOne(dlq).message_id, "b");
  // A reset gives both back, still in order.
  b_.browser->Reset(absl::UnavailableError("the test drops the connection"));
  ASSERT_OK(b_.browser->Connect());
  EXPECT_EQ(ReadyIn(dlq, 2), 2);
  Delivery again = TakeOne(dlq);
  EXPECT_EQ(again.message_id, "a");
  EXPECT_OK(b_.browser->Ack(again.delivery_tag));
  Delivery last = TakeOne(dlq);
  EXPECT_EQ(last.message_id, "b");
  EXPECT_OK(b_.browser->Ack(last.delivery_tag));
  auto empty = b_.browser->Take(dlq);
  ASSERT_OK(empty);
  EXPECT_EQ(empty->delivery_tag, 0u);  // an empty queue gives tag 0
}

TEST_P(BrokerContractTest, ALockIsOneConnectionsUntilItUnlocksOrGoes) {
  ASSERT_NE(b_.other_browser, nullptr);
  QueueBrowser& mine = *b_.browser;
  QueueBrowser& other = *b_.other_browser;
  ASSERT_OK(mine.Connect());
  ASSERT_OK(other.Connect());
  const std::string dlq = DeadLetterQueueOf(b_.queue);
  EXPECT_TRUE(Locks(mine, dlq));
  EXPECT_TRUE(Locks(mine, dlq));  // held already
  EXPECT_FALSE(Locks(other, dlq));
  // Refused, the other link stays usable, and its Unlock of a lock it does
  // not hold frees nothing.
  EXPECT_OK(other.Inspect(dlq));
  auto empty = other.Take(dlq);
  ASSERT_OK(empty);
  EXPECT_EQ(empty->delivery_tag, 0u);
  EXPECT_OK(other.Unlock(dlq));
  EXPECT_FALSE(Locks(other, dlq));
  // Another queue's lock is another lock.
  EXPECT_TRUE(Locks(other, b_.queue));
  EXPECT_OK(other.Unlock(b_.queue));
  // Unlocked, it is the other's to take.
  EXPECT_OK(mine.Unlock(dlq));
  EXPECT_OK(mine.Unlock(dlq));  // not held: nothing to do
  EXPECT_TRUE(Locks(other, dlq));
  EXPECT_FALSE(Locks(mine, dlq));
  // The lock goes with the connection that holds it (a process that dies).
  other.Reset(absl::UnavailableError("the test drops the connection"));
  const absl::Time deadline = absl::Now() + kPatience;
  bool locked = false;
  while (!(locked = Locks(mine, dlq)) && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(locked);
  EXPECT_OK(mine.Unlock(dlq));
}

TEST_P(BrokerContractTest, InspectCountsReadyMessagesAndAMissingQueueIsNotFound) {
  PublishConfirmed({Message("a"), Message("b")});
  const absl::Time deadline = absl::Now() + kPatience;
  absl::StatusOr<QueueState> state;
  do {
    Route();
    state = b_.publisher->Inspect(b_.queue);
  } while (state.ok() && state->ready != 2 && absl::Now() < deadline);
  ASSERT_OK(state);
  EXPECT_EQ(state->ready, 2);
  EXPECT_EQ(state->consumers, 0);  // the consumer has not connected
  // NOT_FOUND, and each link stays usable.
  EXPECT_THAT(b_.publisher->Inspect(b_.missing_queue), StatusIs(absl::StatusCode::kNotFound));
  PublishConfirmed({Message("after")});
  ASSERT_OK(b_.browser->Connect());
  EXPECT_THAT(b_.browser->Inspect(b_.missing_queue), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(ReadyIn(DeadLetterQueueOf(b_.queue), 0), 0);
}

}  // namespace outbox::testing
