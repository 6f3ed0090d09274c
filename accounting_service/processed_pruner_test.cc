#include "shared/outbox/inbox_pruner.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "accounting_service/payment_consumer.h"
#include "events/v1/events.pb.h"
#include "shared/testing/fakes.h"
#include "shared/testing/sequential_ids.h"
#include "shared/testing/status_matchers.h"

namespace outbox::accounting {
namespace {

using ::outbox::testing::FakeConsumer;
using ::outbox::testing::FakePublisher;
using ::outbox::testing::InMemoryProcessedLog;
using ::outbox::testing::ManualClock;

class ProcessedPrunerTest : public ::testing::Test {
 protected:
  ManualClock clock_;
  InMemoryProcessedLog log_;
  MetricsRegistry metrics_;
};

TEST_F(ProcessedPrunerTest, IdsOlderThanTheRetentionGoInBoundedBatchesYoungerOnesStay) {
  const int64_t hour = absl::ToInt64Milliseconds(absl::Hours(1));
  const int64_t now = clock_.NowMillis();
  for (int i = 0; i < 12; ++i) log_.rows.emplace(now - 3 * hour + i, "old");
  for (int i = 0; i < 3; ++i) log_.rows.emplace(now - hour / 2, "young");
  ProcessedPruner pruner(log_, clock_, metrics_, {absl::Hours(1), 5, 2});

  auto first = pruner.Pass();  // two full batches: stops with more due
  ASSERT_OK(first);
  EXPECT_EQ(*first, 10);
  EXPECT_TRUE(pruner.behind());
  EXPECT_EQ(log_.limits, (std::vector<int>{5, 5}));

  auto second = pruner.Pass();  // a short batch ends the pass
  ASSERT_OK(second);
  EXPECT_EQ(*second, 2);
  EXPECT_FALSE(pruner.behind());
  EXPECT_EQ(log_.limits, (std::vector<int>{5, 5, 5}));

  ASSERT_EQ(log_.rows.size(), 3u);
  for (const auto& [at, id] : log_.rows) EXPECT_EQ(id, "young");
  EXPECT_EQ(pruner.pruned(), 12);
  EXPECT_NE(metrics_.Render().find("outbox_processed_pruned_total 12"), std::string::npos);
}

TEST_F(ProcessedPrunerTest, ZeroRetentionKeepsEveryId) {
  log_.rows.emplace(0, "ancient");
  ProcessedPruner pruner(log_, clock_, metrics_, {absl::ZeroDuration(), 5, 2});
  auto pruned = pruner.Pass();
  ASSERT_OK(pruned);
  EXPECT_EQ(*pruned, 0);
  EXPECT_TRUE(log_.limits.empty());
  EXPECT_EQ(log_.rows.size(), 1u);
}

TEST_F(ProcessedPrunerTest, AFailedBatchEndsThePass) {
  log_.rows.emplace(0, "old");
  log_.fail_with = absl::UnavailableError("database is locked");
  ProcessedPruner pruner(log_, clock_, metrics_, {absl::Hours(1), 5, 2});
  EXPECT_TRUE(absl::IsUnavailable(pruner.Pass().status()));
  EXPECT_EQ(log_.limits.size(), 1u);
  log_.fail_with = absl::OkStatus();
  auto pruned = pruner.Pass();
  ASSERT_OK(pruned);
  EXPECT_EQ(*pruned, 1);
}

// The whole path on a real accounting.db: a message booked, its id pruned,
// the same message delivered again.
TEST(ProcessedPruningTest, APrunedMessageDeliveredAgainBooksNothingAndIsAnsweredAsADuplicate) {
  char tmpl[] = "/tmp/processed_pruner_test.XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  ManualClock clock;
  testing::SequentialIds ids("v-");
  auto store = VoucherStore::Open(dir + "/accounting.db", DbOptions{}, ids, clock);
  ASSERT_OK(store);
  FakeConsumer queue;
  FakePublisher replies;
  MetricsRegistry metrics;
  PaymentConsumer consumer(queue, replies, **store, clock, metrics, ConsumerOptions{});
  ProcessedPruner pruner(**store, clock, metrics, {absl::Hours(720), 1000, 5});

  events::v1::PaymentCreated event;
  event.set_message_id("m1");
  event.set_payment_id("p1");
  event.set_payer_account("alice");
  event.set_payee_account("bob");
  event.set_amount_minor(100);
  event.set_currency("EUR");
  Delivery d;
  d.message_id = "m1";
  d.reply_to = "ACC_QUEUE";
  d.body = event.SerializeAsString();
  queue.Push(d);
  ASSERT_TRUE(consumer.Step());
  ASSERT_EQ(replies.published.size(), 1u);
  events::v1::PaymentAccounted booked;
  ASSERT_TRUE(booked.ParseFromString(replies.published[0].body));
  EXPECT_FALSE(booked.duplicate());

  clock.Advance(absl::Hours(719));
  auto pruned = pruner.Pass();
  ASSERT_OK(pruned);
  EXPECT_EQ(*pruned, 0);  // not old enough yet
  clock.Advance(absl::Hours(2));
  pruned = pruner.Pass();
  ASSERT_OK(pruned);
  EXPECT_EQ(*pruned, 1);

  d.redelivered = true;
  queue.Push(d);
  ASSERT_TRUE(consumer.Step());
  ASSERT_EQ(replies.published.size(), 2u);
  events::v1::PaymentAccounted again;
  ASSERT_TRUE(again.ParseFromString(replies.published[1].body));
  EXPECT_TRUE(again.duplicate());
  EXPECT_EQ(again.voucher_id(), booked.voucher_id());
  EXPECT_EQ(consumer.applied(), 1);
  EXPECT_EQ(consumer.duplicates(), 1);
  auto page = (*store)->List(0, 10);
  ASSERT_OK(page);
  EXPECT_EQ(page->items.size(), 1u);
  EXPECT_EQ(queue.acked.size(), 2u);

  store->reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace outbox::accounting
