// The order service against a real RabbitMQ node: ORDER_TEST_AMQP_URL names
// it (tests/example_package_test.sh passes the test run's node). Without it
// the test fails; it never skips.
#include "order_service.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "shared/amqp/internal/amqp_transport.h"
#include "shared/outbox/internal/reply_format.h"
#include "shared/outbox/message_auth.h"
#include "shared/testing/status_matchers.h"

namespace order {
namespace {

constexpr absl::Duration kPatience = absl::Seconds(20);

class OrderServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* url = std::getenv("ORDER_TEST_AMQP_URL");
    ASSERT_NE(url, nullptr) << "ORDER_TEST_AMQP_URL is not set";
    auto parsed = outbox::AmqpUrl::Parse(url);
    ASSERT_OK(parsed);
    amqp_ = *parsed;
    auto keys = outbox::MessageKeys::Parse(
        "order-test 5f0c8a2e9b7d4c1a3e6f8b0d2c4a6e8f1b3d5f7a9c0e2b4d6f8a0c2e4b6d8f0a");
    ASSERT_OK(keys);
    keys_ = std::make_unique<outbox::MessageKeys>(*keys);
    char tmpl[] = "/tmp/order_service_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // Queues of this run only: the broker is shared with other tests.
    const std::string run = absl::StrCat(getpid(), "-", absl::ToUnixMicros(absl::Now()));
    orders_ = absl::StrCat("order.", run, ".ORDERS");
    replies_ = absl::StrCat("order.", run, ".REPLIES");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  OrderServiceOptions Options() const {
    return {amqp_, orders_, replies_, outbox::Signing::With(*keys_)};
  }

  outbox::AmqpUrl amqp_;
  std::unique_ptr<outbox::MessageKeys> keys_;
  std::string dir_;
  std::string orders_;
  std::string replies_;
};

TEST_F(OrderServiceTest, OrderPlacedIsRelayedSignedAndItsReplyClosesTheRow) {
  auto store = OrderStore::Open(dir_ + "/orders.db", outbox::SystemClock::Get());
  ASSERT_OK(store);
  auto service = OrderService::Start(**store, Options());
  ASSERT_OK(service);
  const Order order{"o-1", "alice", 1250};
  auto message_id = (*service)->Place(order);
  ASSERT_OK(message_id);
  EXPECT_EQ((*service)->Place(order).status().code(), absl::StatusCode::kAlreadyExists);

  // The consumer's side: OrderPlaced arrives on the orders queue, signed...
  outbox::AmqpConsumer consumer(amqp_, outbox::Topology{{orders_}}, "order-test-consumer", orders_,
                                /*prefetch=*/8);
  std::vector<outbox::Delivery> got;
  for (absl::Time end = absl::Now() + kPatience; got.empty() && absl::Now() < end;) {
    if (!consumer.Connect().ok()) continue;  // the dialer's backoff paces this
    auto next = consumer.Next(1, absl::Milliseconds(500));
    if (next.ok()) got = *next;
  }
  ASSERT_EQ(got.size(), 1u) << "no OrderPlaced on " << orders_;
  EXPECT_EQ(got[0].type, "OrderPlaced");
  EXPECT_EQ(got[0].message_id, *message_id);
  EXPECT_EQ(got[0].body, "order_id=o-1 customer=alice amount_minor=1250");
  EXPECT_EQ(got[0].reply_to, replies_);
  EXPECT_OK(outbox::CheckSignature(keys_.get(), got[0]));
  EXPECT_EQ(*(*service)->MessageStatus(*message_id), outbox::OutboxStatus::kSending);

  // ...and its reply, in the library's format, signed, goes to reply_to, confirmed.
  outbox::AmqpPublisher broker(amqp_, outbox::Topology{{replies_}}, "order-test-replier");
  const absl::Status connected = broker.Connect();
  ASSERT_OK(connected);
  outbox::SigningPublisher replier(broker, keys_.get());
  outbox::Applied applied;
  applied.reference = "shipment-o-1";
  const outbox::OutgoingMessage reply = outbox::DefaultReply(
      got[0].reply_to, got[0].message_id, "o-1", applied, outbox::SystemClock::Get().NowMillis());
  auto confirms =
      outbox::PublishAndConfirm(replier, {reply}, absl::Seconds(5), outbox::SystemClock::Get());
  ASSERT_OK(confirms);
  ASSERT_TRUE((*confirms)[0].ok);
  const absl::Status acked = consumer.Ack(got[0].delivery_tag, false);
  ASSERT_OK(acked);

  // The producer's ack listener closes the row.
  auto closed = (*service)->producer().WaitUntilClosed(absl::Now() + kPatience);
  ASSERT_OK(closed);
  EXPECT_EQ(closed->sent, 1);
  EXPECT_EQ(*(*service)->MessageStatus(*message_id), outbox::OutboxStatus::kSent);
  (*service)->Stop();
}

// Callers at the same time share the producer's commits, each order under
// a savepoint of its own: one of eight callers placing the same order wins,
// the others are ALREADY_EXISTS, and the rest of their group commits.
TEST_F(OrderServiceTest, OrdersPlacedAtOnceAreEachWrittenOnce) {
  auto store = OrderStore::Open(dir_ + "/orders.db", outbox::SystemClock::Get());
  ASSERT_OK(store);
  auto service = OrderService::Start(**store, Options());
  ASSERT_OK(service);
  OrderService& orders = **service;

  EXPECT_EQ(orders.Place({"", "alice", 1}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(orders.Place({"o-0", "alice", 0}).status().code(), absl::StatusCode::kInvalidArgument);

  constexpr int kCallers = 8;
  std::atomic<int> placed{0}, known{0}, other{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < kCallers; ++t) {
    callers.emplace_back([&, t] {
      // The same order from every caller, then one of each caller's own.
      for (const Order& order :
           {Order{"o-same", "bob", 700}, Order{absl::StrCat("o-", t), "bob", 700}}) {
        const absl::StatusCode code = orders.Place(order).status().code();
        if (code == absl::StatusCode::kOk)
          ++placed;
        else if (code == absl::StatusCode::kAlreadyExists)
          ++known;
        else
          ++other;
      }
    });
  }
  absl::Mutex mu;
  int async_done = 0, async_ok = 0;
  for (int i = 0; i < 16; ++i) {
    orders.PlaceAsync({absl::StrCat("a-", i), "carol", 100 + i},
                      [&](absl::StatusOr<std::string> id) {
                        absl::MutexLock lock(&mu);
                        ++async_done;
                        if (id.ok()) ++async_ok;
                      });
  }
  for (std::thread& c : callers) c.join();
  {
    absl::MutexLock lock(&mu);
    const auto all_answered = +[](int* n) { return *n == 16; };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(all_answered, &async_done), kPatience));
    EXPECT_EQ(async_ok, 16);
  }
  EXPECT_EQ(placed.load(), kCallers + 1);
  EXPECT_EQ(known.load(), kCallers - 1);
  EXPECT_EQ(other.load(), 0);
  auto rows = orders.producer().CountRows();
  ASSERT_OK(rows);
  EXPECT_EQ(rows->sending + rows->sent, kCallers + 1 + 16);
  EXPECT_EQ(orders.producer().written(), kCallers + 1 + 16);
  orders.Stop();
}

}  // namespace
}  // namespace order
