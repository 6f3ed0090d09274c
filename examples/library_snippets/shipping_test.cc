// A test of the consumer's handler over the test kit's fakes (the broker)
// and a real SQLite file, as docs/library.md shows it.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "shared/outbox/message_auth.h"
#include "shared/roles/consumer.h"
#include "shared/testing/fakes.h"
#include "shared/testing/manual_clock.h"
#include "shared/testing/status_matchers.h"
#include "shared/testing/temp_dir.h"
#include "shipping.h"  // your step and schema: ShipOrder, ShippingSchema()

using outbox::testing::FakeConsumer;
using outbox::testing::FakePublisher;
using outbox::testing::SignedBy;

TEST(ShippingTest, ShipsEachOrderOnceAndAnswersEveryCopy) {
  outbox::TempDir dir;
  auto file = outbox::OpenSqliteFile(dir.path() + "/shipping.db", {}, &shop::ShippingSchema());
  ASSERT_OK(file);
  outbox::testing::ManualClock clock;
  outbox::SqliteApply shipping(**file, "OrderPlaced", shop::ShipOrder, {}, clock);

  // A test key: an id and a secret of 32 bytes or more.
  auto keys = outbox::MessageKeys::Parse("test " + std::string(64, 'a'));
  ASSERT_OK(keys);
  auto deliveries = std::make_unique<FakeConsumer>();
  auto replies = std::make_unique<FakePublisher>();
  FakeConsumer& queue = *deliveries;  // the consumer owns the fakes; the test reads them
  FakePublisher& broker = *replies;
  outbox::Consumer::Options options;
  options.queue = "shop.orders";
  options.signing = outbox::Signing::With(*keys);
  options.clock = &clock;
  auto consumer =
      outbox::Consumer::Create(shipping, options, std::move(deliveries), std::move(replies));
  ASSERT_OK(consumer);

  outbox::Delivery order;
  order.message_id = "m-o-1";
  order.type = "OrderPlaced";
  order.reply_to = "shop.orders.replies";
  order.body = "o-1";
  order.shard_key = "o-1";  // the producer's business key
  outbox::Delivery refund = order;
  refund.message_id = "m-r-1";
  refund.type = "RefundIssued";
  queue.Push(SignedBy(*keys, order));
  queue.Push(SignedBy(*keys, order));   // a copy, as after a lost ack
  queue.Push(SignedBy(*keys, refund));  // not an OrderPlaced
  queue.Push(order);                    // unsigned
  ASSERT_TRUE((*consumer)->Step());     // one batch, one transaction

  EXPECT_EQ((*consumer)->booked(), 1);
  EXPECT_EQ((*consumer)->duplicates(), 1);
  EXPECT_EQ((*consumer)->unauthenticated(), 1);
  EXPECT_EQ(queue.dead_lettered.size(), 2u);  // the refund and the unsigned copy
  EXPECT_EQ(broker.published.size(), 2u);     // both copies of the order answered
  EXPECT_EQ(queue.acked.size(), 2u);          // once their replies were confirmed
  int shipments = 0;
  ASSERT_OK((*file)->Read("count shipments", [&](SQLite::Database& db) {
    shipments = db.execAndGet("SELECT count(*) FROM shipments").getInt();
    return absl::OkStatus();
  }));
  EXPECT_EQ(shipments, 1);
}
