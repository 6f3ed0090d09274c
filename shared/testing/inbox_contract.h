#pragma once

// The contract of a consumer's inbox as the pruner sees it (ProcessedLog,
// shared/outbox/repository.h): one suite for the fake and every store.
// Include in exactly one .cc of a test binary and instantiate it there:
//
//   INSTANTIATE_TEST_SUITE_P(Sqlite, InboxContractTest,
//                            ::testing::Values(InboxImpl{"sqlite", MakeSqlite}), InboxImplName);
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "shared/outbox/repository.h"
#include "shared/testing/status_matchers.h"

namespace outbox::testing {

struct InboxUnderTest {
  ProcessedLog* log = nullptr;
  // Records `message_id` as processed at `processed_at_ms`.
  std::function<void(const std::string& message_id, int64_t processed_at_ms)> add;
  std::function<int64_t()> count;  // ids kept
  std::function<bool(const std::string&)> has;
  std::shared_ptr<void> owner;
};

struct InboxImpl {
  std::string name;
  std::function<InboxUnderTest()> make;
};

inline void PrintTo(const InboxImpl& impl, std::ostream* os) {
  *os << impl.name;
}
inline std::string InboxImplName(const ::testing::TestParamInfo<InboxImpl>& info) {
  return info.param.name;
}

class InboxContractTest : public ::testing::TestWithParam<InboxImpl> {
 protected:
  void SetUp() override { impl_ = GetParam().make(); }
  InboxUnderTest impl_;
};

TEST_P(InboxContractTest, PrunesOnlyIdsOlderThanTheCutoffOldestFirstAtMostTheLimit) {
  impl_.add("m3", 300);
  impl_.add("m1", 100);
  impl_.add("m2", 200);
  impl_.add("m9", 900);
  auto pruned = impl_.log->PruneProcessed(/*cutoff_ms=*/500, /*limit=*/2);
  ASSERT_OK(pruned);
  EXPECT_EQ(*pruned, 2);
  EXPECT_FALSE(impl_.has("m1"));
  EXPECT_FALSE(impl_.has("m2"));
  EXPECT_TRUE(impl_.has("m3"));
  pruned = impl_.log->PruneProcessed(500, 2);
  ASSERT_OK(pruned);
  EXPECT_EQ(*pruned, 1);
  EXPECT_EQ(impl_.count(), 1);
  EXPECT_TRUE(impl_.has("m9"));
}

TEST_P(InboxContractTest, NothingDueIsNothingPruned) {
  impl_.add("m1", 1000);
  auto pruned = impl_.log->PruneProcessed(1000, 10);  // not before the cutoff: kept
  ASSERT_OK(pruned);
  EXPECT_EQ(*pruned, 0);
  EXPECT_EQ(impl_.count(), 1);
}

}  // namespace outbox::testing
