#include "shared/outbox/transport.h"

#include <gtest/gtest.h>

#include "shared/observability/metrics.h"
#include "shared/outbox/internal/dead_letter.h"
#include "shared/testing/fakes.h"
#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

using testing::FakeConsumer;
using testing::FakePublisher;
using testing::ManualClock;

std::vector<OutgoingMessage> Messages(int n) {
  std::vector<OutgoingMessage> out;
  for (int i = 0; i < n; ++i) out.push_back({"Q", "m" + std::to_string(i), "b", "", "T"});
  return out;
}

TEST(PublishAndConfirmTest, ReportsEachMessagesAnswer) {
  ManualClock clock;
  FakePublisher pub;
  pub.clock = &clock;
  ASSERT_OK(pub.Connect());
  pub.answer = [](const OutgoingMessage& m) {
    if (m.message_id == "m1") return FakePublisher::Answer::kNack;
    if (m.message_id == "m2") return FakePublisher::Answer::kReturn;
    if (m.message_id == "m3") return FakePublisher::Answer::kSilent;
    return FakePublisher::Answer::kAck;
  };
  auto confirms = PublishAndConfirm(pub, Messages(4), absl::Seconds(5), clock);
  ASSERT_OK(confirms);
  EXPECT_TRUE((*confirms)[0].ok);
  EXPECT_FALSE((*confirms)[1].ok);
  EXPECT_FALSE((*confirms)[1].unroutable);
  EXPECT_TRUE((*confirms)[2].unroutable);
  EXPECT_FALSE((*confirms)[3].ok);  // never answered: timed out
}

TEST(PublishAndConfirmTest, ALostConnectionConfirmsNothing) {
  ManualClock clock;
  FakePublisher pub;
  EXPECT_TRUE(
      absl::IsUnavailable(PublishAndConfirm(pub, Messages(1), absl::Seconds(1), clock).status()));
}

TEST(DeadLetterTest, CountsAndRejectsWithoutRequeue) {
  FakeConsumer consumer;
  ASSERT_OK(consumer.Connect());
  Delivery d;
  d.message_id = "bad-1";
  const uint64_t tag = consumer.Push(d);
  auto got = consumer.Next(10, absl::ZeroDuration());
  ASSERT_EQ(got->size(), 1u);
  MetricsRegistry metrics;
  Counter& counter = metrics.AddCounter("dead_total", "dead");
  ASSERT_OK(DeadLetter(consumer, counter, "EVENTS", (*got)[0], "garbage"));
  EXPECT_EQ(consumer.rejected.count(tag), 1u);
  EXPECT_TRUE(consumer.requeued.empty());
  EXPECT_EQ(counter.value(), 1);
}

}  // namespace
}  // namespace outbox
