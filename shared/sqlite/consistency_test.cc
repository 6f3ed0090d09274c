#include "shared/sqlite/consistency.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <SQLiteCpp/SQLiteCpp.h>

#include <string>

#include "shared/outbox/internal/state_machine.h"
#include "shared/sqlite/inbox.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/testing/status_matchers.h"
#include "shared/testing/temp_dir.h"

namespace outbox {
namespace {

using ::outbox::testing::StatusIs;
using ::testing::HasSubstr;

// A producer's file (orders and the outbox) and its consumer's (shipments
// and the inbox), written with plain SQL, checked by the library alone (the
// test kit's IsConsistent is shared/testing/consistency_test.cc's).
class ConsistencyTest : public ::testing::Test {
 protected:
  ConsistencyTest()
      : producer_(dir_.path() + "/orders.db", SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE),
        consumer_(dir_.path() + "/shipping.db", SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE) {
    producer_.exec("CREATE TABLE orders (order_id TEXT PRIMARY KEY)");
    CreateOutboxTable(producer_);
    consumer_.exec("CREATE TABLE shipments (order_id TEXT PRIMARY KEY)");
    CreateInboxTable(consumer_);
  }

  // An order and its row, `status` as given.
  void Order(const std::string& id, OutboxStatus status) {
    producer_.exec("INSERT INTO orders VALUES ('" + id + "')");
    OutboxMessage row = NewOutboxMessage({id, "order", id, "orders", "OrderPlaced", "", id, ""},
                                         1000, RetryPolicy{});
    row.status = status;
    OutboxInserter(producer_).Insert(row);
  }
  // The consumer applied `id`: its shipment and its inbox record.
  void Shipped(const std::string& id) {
    consumer_.exec("INSERT INTO shipments VALUES ('" + id + "')");
    Inbox(consumer_).Record(id, id, "ship-" + id, 2000);
  }

  absl::StatusOr<ConsistencyReport> Check(const ConsistencyOptions& options = {}) {
    return CheckConsistency(dir_.path() + "/orders.db", dir_.path() + "/shipping.db", options);
  }

  TempDir dir_{"consistency_test"};
  SQLite::Database producer_;
  SQLite::Database consumer_;
};

const ConsistencyOptions kShipEveryOrder{
    {{"order without its shipment",
      "SELECT count(*) FROM orders o WHERE NOT EXISTS "
      "(SELECT 1 FROM consumer.shipments s WHERE s.order_id = o.order_id)"}}};

TEST_F(ConsistencyTest, EveryRowSentAndAppliedIsConsistent) {
  Order("o1", OutboxStatus::kSent);
  Order("o2", OutboxStatus::kSent);
  producer_.exec("INSERT INTO outbox_archive SELECT * FROM outbox WHERE message_id = 'o2'");
  producer_.exec("DELETE FROM outbox WHERE message_id = 'o2'");
  Shipped("o1");
  Shipped("o2");
  auto report = Check(kShipEveryOrder);
  ASSERT_OK(report);
  EXPECT_TRUE(report->ok) << report->ToString();
  EXPECT_EQ(report->sent, 1);
  EXPECT_EQ(report->archived, 1);
  EXPECT_EQ(report->inbox, 2);
}

TEST_F(ConsistencyTest, NamesWhatIsLeftUndone) {
  Order("sending", OutboxStatus::kSending);
  Order("failed", OutboxStatus::kFailed);
  Order("unapplied", OutboxStatus::kSent);  // acknowledged, yet not in the inbox
  Shipped("stranger");                      // in the inbox, never written
  auto report = Check(kShipEveryOrder);
  ASSERT_OK(report);
  EXPECT_FALSE(report->ok);
  EXPECT_EQ(report->sending, 1);
  EXPECT_EQ(report->failed, 1);
  EXPECT_EQ(report->unapplied, 1);
  EXPECT_EQ(report->unknown, 1);
  EXPECT_THAT(report->ToString(), HasSubstr("[order without its shipment: 3]"));
}

TEST_F(ConsistencyTest, FailedRowsAndOtherProducersCanBeExpected) {
  Order("refused", OutboxStatus::kFailed);
  Shipped("from-another-producer");
  ConsistencyOptions options;
  EXPECT_FALSE(Check(options)->ok);
  options.allow_failed = true;
  options.other_producers = true;
  auto report = Check(options);
  ASSERT_OK(report);
  EXPECT_TRUE(report->ok) << report->ToString();
}

TEST_F(ConsistencyTest, AMissingFileIsNotFoundAndBadSqlAnError) {
  EXPECT_THAT(CheckConsistency(dir_.path() + "/none.db", dir_.path() + "/shipping.db"),
              StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(Check({{{"typo", "SELECT count(*) FROM no_such_table"}}}),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("no_such_table")));
}

}  // namespace
}  // namespace outbox
