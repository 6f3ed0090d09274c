// One options block per process (config.h): what each role's options take
// from it, and what Producer::Start(config) refuses before it connects.
#include "shared/roles/config.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "shared/outbox/internal/reply_format.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/testing/fakes.h"
#include "shared/testing/status_matchers.h"
#include "shared/testing/temp_dir.h"

namespace outbox {
namespace {

using ::outbox::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const DbSchema& OrdersSchema() {
  static const DbSchema* const schema =
      new DbSchema{{{"orders and the outbox", [](SQLite::Database& db) {
                       db.exec("CREATE TABLE orders (order_id TEXT PRIMARY KEY)");
                       CreateOutboxTable(db);
                     }}}};
  return *schema;
}

Config Orders() {
  Config config;
  config.amqp = *AmqpUrl::Parse("amqp://u:p@broker.example:5672/%2F");
  config.signing = Signing::Unsigned();
  config.queue = "orders";
  config.retry.max_attempts = 7;
  config.db = "orders.db";
  config.schema = &OrdersSchema();
  config.producer.window = 64;          // a role's own setting is kept
  config.producer.queue = "elsewhere";  // one the block states is replaced
  config.consumer.prefetch = 32;
  config.recovery.sweep_dead_letters = 5;
  config.recovery.recovery.retry.max_attempts = 2;
  return config;
}

TEST(ConfigTest, EachRoleTakesTheSharedSettingsFromTheBlockAndKeepsItsOwn) {
  const Config config = Orders();
  Producer::Options producer = ProducerOptionsOf(config);
  EXPECT_EQ(producer.queue, "orders");
  EXPECT_EQ(producer.retry.max_attempts, 7);
  EXPECT_EQ(producer.window, 64u);
  EXPECT_EQ(producer.amqp.host, "broker.example");
  Consumer::Options consumer = ConsumerOptionsOf(config);
  EXPECT_EQ(consumer.queue, "orders");
  EXPECT_EQ(consumer.prefetch, 32);
  Recovery::Options recovery = RecoveryOptionsOf(config);
  EXPECT_EQ(recovery.queue, "orders");
  EXPECT_EQ(recovery.db, "orders.db");
  EXPECT_EQ(recovery.producer_db.schema, &OrdersSchema());
  EXPECT_EQ(recovery.recovery.retry.max_attempts, 7);  // the producer's policy, not its own
  EXPECT_EQ(recovery.sweep_dead_letters, 5);
  EXPECT_FALSE(producer.on_closed);
  EXPECT_FALSE(recovery.on_closed);
}

TEST(ConfigTest, TheRowClosedStepIsTheProducersAndRecoverys) {
  Config config = Orders();
  config.on_closed = [](SQLite::Database&, const OutboxMessage&) { return absl::OkStatus(); };
  EXPECT_TRUE(ProducerOptionsOf(config).on_closed);
  EXPECT_TRUE(RecoveryOptionsOf(config).on_closed);
}

TEST(ConfigTest, RecoveryIsNamedAfterTheQueueAndThisProcessUnlessNamed) {
  Config config = Orders();
  EXPECT_THAT(RecoveryOptionsOf(config).recovery.instance_id, StartsWith("orders-"));
  config.instance_id = "orders-recovery-1";
  EXPECT_EQ(RecoveryOptionsOf(config).recovery.instance_id, "orders-recovery-1");
  config.recovery.recovery.instance_id = "own";
  EXPECT_EQ(RecoveryOptionsOf(config).recovery.instance_id, "own");
}

TEST(ConfigTest, ProducerStartRefusesABlockWithoutItsFileOrSchemaBeforeItConnects) {
  Config config = Orders();
  config.db.clear();
  EXPECT_THAT(Producer::Start(config).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("config.db")));
  config = Orders();
  config.schema = nullptr;
  EXPECT_THAT(Producer::Start(config).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("config.schema")));
  TempDir dir;
  config = Orders();
  config.db = dir.path() + "/orders.db";
  config.queue.clear();  // the producer's own check, after the file opened
  EXPECT_THAT(Producer::Start(config).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("queue")));
}

TEST(ConfigTest, AMessageWrittenWithoutAnIdGetsATimeOrderedOne) {
  TempDir dir;
  auto file = OpenSqliteFile(dir.path() + "/orders.db", {}, &OrdersSchema());
  ASSERT_TRUE(file.ok()) << file.status();
  auto publisher = std::make_unique<testing::FakePublisher>();
  testing::FakePublisher& published = *publisher;
  auto producer = Producer::Create(**file, ProducerOptionsOf(Orders()), std::move(publisher),
                                   std::make_unique<testing::FakeConsumer>());
  ASSERT_TRUE(producer.ok()) << producer.status();
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    MessageSpec spec;
    spec.biz_type = "order";
    spec.biz_key = "o-" + std::to_string(i);
    spec.message_type = "OrderPlaced";
    auto id = (*producer)->Write(spec, [](SQLite::Database&) { return absl::OkStatus(); });
    ASSERT_TRUE(id.ok()) << id.status();
    ids.push_back(*id);
  }
  EXPECT_EQ(ids[0].size(), 36u);  // a UUID
  EXPECT_LT(ids[0], ids[1]);
  EXPECT_LT(ids[1], ids[2]);
  (*producer)->RelayStep();
  ASSERT_EQ(published.published.size(), 3u);
  EXPECT_EQ(published.published[0].message_id, ids[0]);
}

TEST(ConfigTest, TheProducersRowClosedStepCommitsWithTheAcknowledgement) {
  TempDir dir;
  auto file = OpenSqliteFile(dir.path() + "/orders.db", {}, &OrdersSchema());
  ASSERT_TRUE(file.ok()) << file.status();
  Config config = Orders();
  std::vector<std::string> closed;
  config.on_closed = [&](SQLite::Database& db, const OutboxMessage& row) {
    closed.push_back(row.message_id + " " + std::string(StatusName(row.status)));
    SQLite::Statement confirm(db,
                              "UPDATE orders SET order_id = order_id || '.confirmed' "
                              "WHERE order_id = ?");
    confirm.bind(1, row.biz_key);
    confirm.exec();
    return absl::OkStatus();
  };
  auto replies = std::make_unique<testing::FakeConsumer>();
  testing::FakeConsumer& acks = *replies;
  auto producer = Producer::Create(**file, ProducerOptionsOf(config),
                                   std::make_unique<testing::FakePublisher>(), std::move(replies));
  ASSERT_TRUE(producer.ok()) << producer.status();
  MessageSpec spec;
  spec.message_id = "m-1";
  spec.biz_type = "order";
  spec.biz_key = "o-1";
  spec.message_type = "OrderPlaced";
  ASSERT_TRUE((*producer)
                  ->Write(spec,
                          [](SQLite::Database& db) {
                            db.exec("INSERT INTO orders VALUES ('o-1')");
                            return absl::OkStatus();
                          })
                  .ok());
  acks.Push(testing::DeliveryOf(DefaultReply("orders.replies", "m-1", "o-1", Applied{})));
  (*producer)->AckStep();
  EXPECT_EQ(closed, std::vector<std::string>{"m-1 SENT"});
  std::string order;
  ASSERT_TRUE((*file)
                  ->Read("orders",
                         [&](SQLite::Database& db) {
                           order = db.execAndGet("SELECT order_id FROM orders").getString();
                           return absl::OkStatus();
                         })
                  .ok());
  EXPECT_EQ(order, "o-1.confirmed");
}

}  // namespace
}  // namespace outbox
