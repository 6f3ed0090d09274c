// The kit's side of the consistency check: IsConsistent, over the library's
// CheckConsistency (shared/sqlite/consistency_test.cc tests the check), and
// the check's names in outbox::testing, which the kit's users spell.
#include "shared/testing/consistency.h"

#include <gtest/gtest.h>

#include <SQLiteCpp/SQLiteCpp.h>

#include <string>

#include "shared/outbox/internal/state_machine.h"
#include "shared/sqlite/inbox.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/testing/temp_dir.h"

namespace outbox::testing {
namespace {

TEST(IsConsistentTest, SucceedsWhenTheCheckDoesAndPrintsTheReportWhenNot) {
  TempDir dir("consistency_test");
  const std::string orders = dir.path() + "/orders.db";
  const std::string shipping = dir.path() + "/shipping.db";
  {
    SQLite::Database producer(orders, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    SQLite::Database consumer(shipping, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    CreateOutboxTable(producer);
    CreateInboxTable(consumer);
    OutboxMessage row = NewOutboxMessage(
        {"o1", "order", "o1", "orders", "OrderPlaced", "", "o1", ""}, 1000, RetryPolicy{});
    row.status = OutboxStatus::kSent;
    OutboxInserter(producer).Insert(row);
  }
  const ConsistencyOptions options;  // outbox::ConsistencyOptions, by its kit name
  const ::testing::AssertionResult unapplied = IsConsistent(orders, shipping, options);
  EXPECT_FALSE(unapplied);
  EXPECT_NE(std::string(unapplied.message()).find("NOT CONSISTENT"), std::string::npos)
      << unapplied.message();
  {
    SQLite::Database consumer(shipping, SQLite::OPEN_READWRITE);
    Inbox(consumer).Record("o1", "o1", "ship-o1", 2000);
  }
  EXPECT_TRUE(IsConsistent(orders, shipping));
  absl::StatusOr<ConsistencyReport> report = CheckConsistency(orders, shipping);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->sent, 1);
  EXPECT_FALSE(IsConsistent(dir.path() + "/none.db", shipping));
}

}  // namespace
}  // namespace outbox::testing
