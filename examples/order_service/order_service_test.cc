// The order service against a real RabbitMQ node: ORDER_TEST_AMQP_URL names
// it (tests/example_package_test.sh passes the test run's node). Without it
// the test fails; it never skips.
#include "order_service.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
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
    char tmpl[] = "/tmp/order_service_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    // Queues of this run only: the broker is shared with other tests.
    const std::string run = absl::StrCat(getpid(), "-", absl::ToUnixMicros(absl::Now()));
    queues_ = {absl::StrCat("order.", run, ".ORDERS"), absl::StrCat("order.", run, ".REPLIES")};
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  outbox::AmqpUrl amqp_;
  std::string dir_;
  OrderQueues queues_;
};

TEST_F(OrderServiceTest, OrderPlacedIsRelayedAndItsReplyClosesTheRow) {
  auto store = OrderStore::Open(dir_ + "/orders.db", queues_, outbox::SystemClock::Get());
  ASSERT_OK(store);
  OrderService service(**store, amqp_, queues_);
  service.Start();
  const Order order{"o-1", "alice", 1250};
  auto message_id = service.Place(order);
  ASSERT_OK(message_id);
  EXPECT_EQ(service.Place(order).status().code(), absl::StatusCode::kAlreadyExists);

  // The consumer's side: OrderPlaced arrives on the orders queue...
  outbox::AmqpConsumer consumer(amqp_, outbox::Topology{{queues_.orders}}, "order-test-consumer",
                                queues_.orders, /*prefetch=*/8);
  std::vector<outbox::Delivery> got;
  for (absl::Time end = absl::Now() + kPatience; got.empty() && absl::Now() < end;) {
    if (!consumer.Connect().ok()) continue;  // the dialer's backoff paces this
    auto next = consumer.Next(1, absl::Milliseconds(500));
    if (next.ok()) got = *next;
  }
  ASSERT_EQ(got.size(), 1u) << "no OrderPlaced on " << queues_.orders;
  EXPECT_EQ(got[0].type, "OrderPlaced");
  EXPECT_EQ(got[0].message_id, *message_id);
  EXPECT_EQ(got[0].body, "order_id=o-1 customer=alice amount_minor=1250");
  EXPECT_EQ(got[0].reply_to, queues_.replies);
  EXPECT_EQ(*(*store)->MessageStatus(*message_id), outbox::OutboxStatus::kSending);

  // ...and its reply (the message id) goes to reply_to, confirmed.
  outbox::AmqpPublisher replier(amqp_, outbox::Topology{{queues_.replies}}, "order-test-replier");
  const absl::Status connected = replier.Connect();
  ASSERT_OK(connected);
  outbox::OutgoingMessage reply;
  reply.topic = got[0].reply_to;
  reply.message_id = "reply-" + *message_id;
  reply.body = *message_id;
  auto confirms =
      outbox::PublishAndConfirm(replier, {reply}, absl::Seconds(5), outbox::SystemClock::Get());
  ASSERT_OK(confirms);
  ASSERT_TRUE((*confirms)[0].ok);
  const absl::Status acked = consumer.Ack(got[0].delivery_tag, false);
  ASSERT_OK(acked);

  // The ack listener closes the row.
  absl::StatusOr<outbox::OutboxStatus> status;
  for (absl::Time end = absl::Now() + kPatience; absl::Now() < end;) {
    status = (*store)->MessageStatus(*message_id);
    if (!status.ok() || *status != outbox::OutboxStatus::kSending) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_OK(status);
  EXPECT_EQ(*status, outbox::OutboxStatus::kSent);
  service.Stop();
}

}  // namespace
}  // namespace order
