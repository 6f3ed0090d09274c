#include "shared/sqlite/sqlite_message_handler.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shared/base/status_macros.h"
#include "shared/outbox/internal/idempotent_consumer.h"
#include "shared/testing/fakes.h"
#include "shared/testing/stamp_handler.h"
#include "shared/testing/status_matchers.h"
#include "shared/testing/temp_dir.h"

namespace outbox::testing {
namespace {

class SqliteMessageHandlerTest : public ::testing::Test {
 protected:
  // One batch through the handler, as the consumer drives it.
  absl::StatusOr<std::vector<Applied>> Batch(StampHandler& handler,
                                             const std::vector<Delivery>& deliveries) {
    ConsumerHandler& h = handler;
    h.Clear();
    for (const Delivery& d : deliveries) RETURN_IF_ERROR(h.Add(d));
    return h.ApplyBatch();
  }
  std::optional<std::string> InInbox(const std::string& message_id) {
    std::optional<std::string> reference;
    EXPECT_OK(file_->Read("find in the inbox", [&](SQLite::Database& db) {
      reference = Inbox(db).Find(message_id);
      return absl::OkStatus();
    }));
    return reference;
  }

  TempDir dir_{"sqlite_message_handler_test"};
  ManualClock clock_;
  std::unique_ptr<SqliteFile> file_ = OpenStampFile(dir_.path() + "/stamps.db");
  StampHandler handler_{*file_, clock_};
};

TEST_F(SqliteMessageHandlerTest, AppliesEachNewMessageOnceAndRecordsItInTheInbox) {
  auto applied = Batch(handler_, {StampDelivery("m1", "a"), StampDelivery("m2", "b"),
                                  StampDelivery("m1", "a")});  // the same message twice
  ASSERT_OK(applied);
  ASSERT_EQ(applied->size(), 3u);
  EXPECT_FALSE((*applied)[0].duplicate);
  EXPECT_EQ((*applied)[0].reference, "stamp-a-1");
  EXPECT_FALSE((*applied)[1].duplicate);
  EXPECT_TRUE((*applied)[2].duplicate);
  EXPECT_EQ((*applied)[2].reference, "stamp-a-1");
  EXPECT_EQ(handler_.applies, 2);
  EXPECT_EQ(CountRows(*file_, "stamps"), 2);
  EXPECT_EQ(InInbox("m1"), "stamp-a-1");
  EXPECT_OK(file_->Read("read the inbox row", [&](SQLite::Database& db) {
    SQLite::Statement row(db, "SELECT biz_key, processed_at FROM inbox WHERE message_id = 'm2'");
    EXPECT_TRUE(row.executeStep());
    EXPECT_EQ(row.getColumn(0).getString(), "b");
    EXPECT_EQ(row.getColumn(1).getInt64(), clock_.NowMillis());
    return absl::OkStatus();
  }));

  auto again = Batch(handler_, {StampDelivery("m2", "b")});
  ASSERT_OK(again);
  EXPECT_TRUE((*again)[0].duplicate);
  EXPECT_EQ((*again)[0].reference, "stamp-b-2");
  EXPECT_EQ(handler_.applies, 2);
}

// Only the message id by default: another message about the same key is new.
// With applied_by_key, it is a duplicate of the first (and is recorded by
// its own id); so is a copy whose id was pruned from the inbox.
TEST_F(SqliteMessageHandlerTest, WithAppliedByKeyAMessageAboutAKeyAppliedBeforeIsADuplicate) {
  ASSERT_OK(Batch(handler_, {StampDelivery("m1", "a")}));
  ASSERT_OK(Batch(handler_, {StampDelivery("m1-again", "a")}));
  EXPECT_EQ(CountRows(*file_, "stamps"), 2);

  StampHandler by_key(*file_, clock_, {InboxTable{}, kStampsByKey});
  auto applied = Batch(
      by_key, {StampDelivery("m2", "b"), StampDelivery("m2-again", "b"), StampDelivery("m3", "a")});
  ASSERT_OK(applied);
  EXPECT_FALSE((*applied)[0].duplicate);
  EXPECT_TRUE((*applied)[1].duplicate);  // its key applied earlier in the same batch
  EXPECT_EQ((*applied)[1].reference, (*applied)[0].reference);
  EXPECT_TRUE((*applied)[2].duplicate);
  EXPECT_EQ(by_key.applies, 1);
  EXPECT_EQ(InInbox("m2-again"), (*applied)[0].reference);

  clock_.Advance(absl::Hours(1));
  auto pruned = SqliteProcessedLog(*file_).PruneProcessed(clock_.NowMillis(), 100);
  ASSERT_OK(pruned);
  EXPECT_EQ(*pruned, 5);
  auto after_prune = Batch(by_key, {StampDelivery("m2", "b")});
  ASSERT_OK(after_prune);
  EXPECT_TRUE((*after_prune)[0].duplicate);
  EXPECT_EQ((*after_prune)[0].reference, (*applied)[0].reference);
  EXPECT_EQ(CountRows(*file_, "stamps"), 3);
}

// Rejects is asked about new messages only, after the inbox: a message
// applied before is answered as applied whatever the rules say today. A
// refused message writes nothing and is not kept (a copy is judged again).
TEST_F(SqliteMessageHandlerTest, OnlyANewMessageIsJudgedAndARefusedOneWritesNothing) {
  ASSERT_OK(Batch(handler_, {StampDelivery("m1", "a", 50)}));
  handler_.limit = 10;  // tighter rules from now on
  handler_.judged.clear();
  auto applied = Batch(handler_, {StampDelivery("m1", "a", 50), StampDelivery("m2", "b", 50),
                                  StampDelivery("old", "c", 50, "stamps.done", "StampV1"),
                                  StampDelivery("m3", "d", 5)});
  ASSERT_OK(applied);
  EXPECT_EQ(handler_.judged, (std::vector<std::string>{"m2", "old", "m3"}));
  EXPECT_TRUE((*applied)[0].duplicate);
  EXPECT_EQ((*applied)[0].rejected_reason, "");
  EXPECT_EQ((*applied)[1].rejected_reason, "count 50 over 10");
  EXPECT_EQ((*applied)[1].dead_letter_reason, "");
  EXPECT_EQ((*applied)[2].rejected_reason, "");
  EXPECT_EQ((*applied)[2].dead_letter_reason, "count 50 over 10");  // understands no reject
  EXPECT_FALSE((*applied)[3].duplicate);
  EXPECT_EQ(CountRows(*file_, "stamps"), 2);
  EXPECT_FALSE(InInbox("m2"));
  EXPECT_FALSE(InInbox("old"));

  handler_.limit = 100;
  auto later = Batch(handler_, {StampDelivery("m2", "b", 50)});
  ASSERT_OK(later);
  EXPECT_FALSE((*later)[0].duplicate);
  EXPECT_EQ((*later)[0].rejected_reason, "");
}

TEST_F(SqliteMessageHandlerTest, AFailedApplyRollsTheWholeBatchBack) {
  handler_.fail_apply = absl::UnavailableError("the warehouse is closed");
  EXPECT_THAT(Batch(handler_, {StampDelivery("m1", "a")}).status(),
              StatusIs(absl::StatusCode::kUnavailable, "the warehouse is closed"));
  EXPECT_EQ(CountRows(*file_, "stamps"), 0);

  // A SQLite error thrown half-way through: the rows before it go too.
  handler_.fail_apply = absl::OkStatus();
  ASSERT_OK(Batch(handler_, {StampDelivery("m0", "z")}));
  ASSERT_OK(file_->WithWriter("create a trigger", [](SQLite::Database& db) {
    db.exec(
        "CREATE TRIGGER no_b BEFORE INSERT ON stamps WHEN NEW.key = 'b' "
        "BEGIN SELECT RAISE(ABORT, 'no b'); END");
    return absl::OkStatus();
  }));
  EXPECT_THAT(Batch(handler_, {StampDelivery("m1", "a"), StampDelivery("m2", "b")}).status(),
              StatusIs(absl::StatusCode::kAlreadyExists, ::testing::HasSubstr("no b")));
  EXPECT_EQ(CountRows(*file_, "stamps"), 1);
  EXPECT_EQ(CountRows(*file_, "inbox"), 1);
  EXPECT_FALSE(InInbox("m1"));

  // The next batch starts clean.
  auto next = Batch(handler_, {StampDelivery("m1", "a"), StampDelivery("m0", "z")});
  ASSERT_OK(next);
  EXPECT_FALSE((*next)[0].duplicate);
  EXPECT_TRUE((*next)[1].duplicate);
}

TEST_F(SqliteMessageHandlerTest, AMessageWithoutAMessageIdOrThatDoesNotDecodeIsRefused) {
  ConsumerHandler& h = handler_;
  h.Clear();
  EXPECT_THAT(h.Add(StampDelivery("", "a")),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("message_id")));
  Delivery junk = StampDelivery("m1", "a");
  junk.body = "no count";
  EXPECT_THAT(h.Add(junk), StatusIs(absl::StatusCode::kInvalidArgument, "not a Stamp"));
  auto applied = h.ApplyBatch();
  ASSERT_OK(applied);
  EXPECT_TRUE(applied->empty());
}

// A file without the inbox fails the batch (it goes back to the queue, the
// reason in its log line), not the handler's construction.
TEST_F(SqliteMessageHandlerTest, AFileWithoutTheInboxFailsEachBatch) {
  auto bare = OpenSqliteFile(dir_.path() + "/bare.db", DbOptions{}, nullptr);
  ASSERT_OK(bare);
  StampHandler handler(**bare, clock_);
  EXPECT_THAT(Batch(handler, {StampDelivery("m1", "a")}).status(),
              StatusIs(absl::StatusCode::kInternal, ::testing::HasSubstr("no such table: inbox")));
}

// The guarantee itself: a consumer that crashes after its batch committed,
// before the acks, gets the same deliveries again, and whatever the
// handler's Apply writes (here a row per call, with no unique constraint),
// nothing is applied twice: the redelivered copies are answered as
// duplicates, with the reference of the first.
TEST_F(SqliteMessageHandlerTest, ACrashBetweenCommitAndAckNeverAppliesAMessageTwice) {
  FakeConsumer queue;
  MetricsRegistry metrics;
  ConsumerOptions options;
  options.queue = "stamps";
  options.default_reply_to = "stamps.done";
  const std::string path = dir_.path() + "/crash.db";
  {
    auto file = OpenStampFile(path);
    ASSERT_NE(file, nullptr);
    StampHandler handler(*file, clock_);
    FakePublisher replies;
    replies.hold_confirms = true;  // committed and replied to; no confirm, so no ack
    IdempotentConsumer consumer(queue, replies, handler, clock_, metrics, options);
    queue.Push(StampDelivery("m1", "a"));
    queue.Push(StampDelivery("m2", "b"));
    ASSERT_TRUE(consumer.Step());
    EXPECT_EQ(consumer.booked(), 2);
    EXPECT_TRUE(queue.acked.empty());
    // The process dies: its connection goes, the broker redelivers.
    queue.Reset(absl::UnavailableError("consumer killed"));
  }
  ASSERT_EQ(queue.ready(), 2u);

  auto file = OpenStampFile(path);
  ASSERT_NE(file, nullptr);
  StampHandler handler(*file, clock_);
  FakePublisher replies;
  IdempotentConsumer restarted(queue, replies, handler, clock_, metrics, options);
  queue.Push(StampDelivery("m3", "c"));
  ASSERT_TRUE(restarted.Step());
  EXPECT_EQ(handler.applies, 1);  // m3 only
  EXPECT_EQ(CountRows(*file, "stamps"), 3);
  EXPECT_EQ(restarted.duplicates(), 2);
  std::vector<std::string> answers;
  for (const OutgoingMessage& m : replies.published) answers.push_back(m.body);
  EXPECT_THAT(answers, ::testing::UnorderedElementsAre(
                           "m1=duplicate:stamp-a-1", "m2=duplicate:stamp-b-2", "m3=new:stamp-c-1"));
  EXPECT_EQ(queue.acked.size(), 3u);
  EXPECT_EQ(queue.ready(), 0u);
}

// The shortest handler: one message type, a function, the producer's
// business key (the delivery's shard_key) kept in the inbox; another type is
// refused in Add (the consumer dead-letters it); a schema made in one call.
TEST(SqliteApplyTest, AppliesItsTypeByTheFunctionAndKeysByTheShardKey) {
  TempDir dir("sqlite_apply_test");
  const DbSchema schema = ConsumerSchema("CREATE TABLE shipments (order_id TEXT PRIMARY KEY)");
  ASSERT_EQ(schema.latest(), 1);
  auto file = OpenSqliteFile(dir.path() + "/shipping.db", {}, &schema);
  ASSERT_OK(file);
  int applies = 0;
  SqliteApply shipping(**file, "OrderPlaced", [&](SQLite::Database& tx, const Delivery& order) {
    ++applies;
    SQLite::Statement insert(tx, "INSERT INTO shipments VALUES (?)");
    insert.bind(1, order.body);
    insert.exec();
    return absl::StatusOr<std::string>("ship-" + order.body);
  });
  Delivery order;
  order.message_id = "m1";
  order.type = "OrderPlaced";
  order.body = "o-1";
  order.shard_key = "key-1";
  Delivery refund = order;
  refund.message_id = "m2";
  refund.type = "RefundIssued";

  ConsumerHandler& h = shipping;
  h.Clear();
  EXPECT_THAT(h.Add(refund), StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_OK(h.Add(order));
  ASSERT_OK(h.Add(order));  // a copy in the same batch
  auto applied = h.ApplyBatch();
  ASSERT_OK(applied);
  ASSERT_EQ(applied->size(), 2u);
  EXPECT_EQ((*applied)[0].reference, "ship-o-1");
  EXPECT_TRUE((*applied)[1].duplicate);
  EXPECT_EQ(applies, 1);
  ASSERT_OK((*file)->Read("read the inbox", [&](SQLite::Database& db) {
    EXPECT_EQ(db.execAndGet("SELECT biz_key FROM inbox WHERE message_id = 'm1'").getString(),
              "key-1");
    EXPECT_EQ(db.execAndGet("SELECT count(*) FROM shipments").getInt(), 1);
    return absl::OkStatus();
  }));
}

}  // namespace
}  // namespace outbox::testing
