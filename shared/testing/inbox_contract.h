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
#include "shared/testing/under_test.h"

namespace outbox::testing {

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
