#include "shared/outbox/internal/inbox_pruner.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "shared/outbox/internal/idempotent_consumer.h"
#include "shared/testing/fakes.h"
#include "shared/testing/stamp_handler.h"
#include "shared/testing/status_matchers.h"
#include "shared/testing/temp_dir.h"

namespace outbox::testing {
namespace {

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

// The whole path on a real file: a message applied, its id pruned after the
// retention, the same message delivered again. The inbox no longer knows
// it; the adopter's table, kept for good, does (applied_by_key): nothing is
// applied again, and the copy is answered as a duplicate.
TEST(ProcessedPruningTest, AMessageWhoseIdWasPrunedIsStillFoundByItsBusinessKey) {
  TempDir dir("inbox_pruner_test");
  ManualClock clock;
  auto file = OpenStampFile(dir.path() + "/stamps.db");
  ASSERT_NE(file, nullptr);
  StampHandler handler(*file, clock, {InboxTable{}, kStampsByKey});
  FakeConsumer queue;
  FakePublisher replies;
  MetricsRegistry metrics;
  ConsumerOptions options;
  options.queue = "stamps";
  IdempotentConsumer consumer(queue, replies, handler, clock, metrics, options);
  SqliteProcessedLog log(*file);
  ProcessedPruner pruner(log, clock, metrics, {absl::Hours(720), 1000, 5});

  queue.Push(StampDelivery("m1", "a"));
  ASSERT_TRUE(consumer.Step());
  ASSERT_EQ(replies.published.size(), 1u);
  EXPECT_EQ(replies.published[0].body, "m1=new:stamp-a-1");

  clock.Advance(absl::Hours(719));
  auto pruned = pruner.Pass();
  ASSERT_OK(pruned);
  EXPECT_EQ(*pruned, 0);  // not old enough yet
  clock.Advance(absl::Hours(2));
  pruned = pruner.Pass();
  ASSERT_OK(pruned);
  EXPECT_EQ(*pruned, 1);
  EXPECT_EQ(CountRows(*file, "inbox"), 0);

  Delivery again = StampDelivery("m1", "a");
  again.redelivered = true;
  queue.Push(again);
  ASSERT_TRUE(consumer.Step());
  ASSERT_EQ(replies.published.size(), 2u);
  EXPECT_EQ(replies.published[1].body, "m1=duplicate:stamp-a-1");
  EXPECT_EQ(handler.applies, 1);
  EXPECT_EQ(CountRows(*file, "stamps"), 1);
  EXPECT_EQ(CountRows(*file, "inbox"), 1);  // known by its id again
  EXPECT_EQ(queue.acked.size(), 2u);
}

}  // namespace
}  // namespace outbox::testing
