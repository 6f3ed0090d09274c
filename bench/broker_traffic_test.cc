#include "bench/broker_traffic.h"

#include <gtest/gtest.h>

namespace outbox::bench {
namespace {

TEST(BrokerTrafficTest, CountsConfirmedEventsAndReplyMessages) {
  const BrokerTraffic t = ParseBrokerTraffic(
      "# HELP outbox_fast_publish_total fast-path publishes by result\n"
      "outbox_fast_publish_total{result=\"confirmed\"} 1200\n"
      "outbox_fast_publish_total{result=\"failed\"} 7\n"
      "outbox_acks_total{result=\"marked_sent\"} 1195\n"
      "outbox_ack_messages_total 40\n");
  EXPECT_EQ(t.events, 1200);
  EXPECT_EQ(t.replies, 40);
}

TEST(BrokerTrafficTest, WithoutReplyMessageCountEveryAcknowledgementIsOneReply) {
  const BrokerTraffic t = ParseBrokerTraffic(
      "outbox_fast_publish_total{result=\"confirmed\"} 10\n"
      "outbox_acks_total{result=\"marked_sent\"} 9\n"
      "outbox_acks_total{result=\"harmless\"} 2\n");
  EXPECT_EQ(t.replies, 11);
}

TEST(BrokerTrafficTest, NothingKnownIsNotANumber) {
  const BrokerTraffic t = ParseBrokerTraffic("up 1\n");
  EXPECT_TRUE(std::isnan(t.events));
  EXPECT_TRUE(std::isnan(t.replies));
}

}  // namespace
}  // namespace outbox::bench
