// The consumer over the library's SQLite handler and a small adopter of it
// (shared/testing/stamp_handler.h), on a real SQLite file, with the fake
// broker: batches, replies, the confirm window, acks, requeues and dead
// letters.
#include "shared/outbox/internal/idempotent_consumer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "shared/observability/log.h"
#include "shared/testing/fakes.h"
#include "shared/testing/stamp_handler.h"
#include "shared/testing/status_matchers.h"
#include "shared/testing/temp_dir.h"

namespace outbox::testing {
namespace {

using ::testing::HasSubstr;

ConsumerOptions Options() {
  ConsumerOptions o;
  o.queue = "stamps";
  o.default_reply_to = "stamps.done";
  return o;
}

class IdempotentConsumerTest : public ::testing::Test {
 protected:
  IdempotentConsumerTest() { replies_.clock = &clock_; }

  int64_t Stamps() { return CountRows(*file_, "stamps"); }
  bool Counted(const std::string& series) {
    return absl::StrContains(metrics_.Render(), series + "\n");
  }

  TempDir dir_{"idempotent_consumer_test"};
  ManualClock clock_;
  std::unique_ptr<SqliteFile> file_ = OpenStampFile(dir_.path() + "/stamps.db");
  StampHandler handler_{*file_, clock_};
  FakeConsumer queue_;
  FakePublisher replies_;
  MetricsRegistry metrics_;
  IdempotentConsumer consumer_{queue_, replies_, handler_, clock_, metrics_, Options()};
};

TEST_F(IdempotentConsumerTest, AppliesABatchAnswersEachMessageOnItsReplyToThenAcks) {
  queue_.Push(StampDelivery("m1", "a"));
  queue_.Push(StampDelivery("m2", "b", 1, "stamps.done.2"));
  queue_.Push(StampDelivery("m3", "c", 1, /*reply_to=*/""));  // the consumer's default
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(Stamps(), 3);
  ASSERT_EQ(replies_.published.size(), 3u);
  EXPECT_EQ(replies_.published[0].topic, "stamps.done");
  EXPECT_EQ(replies_.published[0].body, "m1=new:stamp-a-1");
  EXPECT_EQ(replies_.published[1].topic, "stamps.done.2");
  EXPECT_EQ(replies_.published[2].topic, "stamps.done");
  EXPECT_EQ(queue_.acked.size(), 3u);
  EXPECT_EQ(consumer_.booked(), 3);
  EXPECT_TRUE(Counted("outbox_consumer_booked_total 3"));
}

TEST_F(IdempotentConsumerTest, ADuplicateAppliesNothingButIsAnsweredAgain) {
  queue_.Push(StampDelivery("m1", "a"));
  queue_.Push(StampDelivery("m1", "a"));  // a second copy in the same batch
  ASSERT_TRUE(consumer_.Step());
  Delivery again = StampDelivery("m1", "a");
  again.redelivered = true;
  queue_.Push(again);
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(Stamps(), 1);
  EXPECT_EQ(handler_.applies, 1);
  ASSERT_EQ(replies_.published.size(), 3u);
  EXPECT_EQ(replies_.published[1].body, "m1=duplicate:stamp-a-1");
  EXPECT_EQ(replies_.published[2].body, "m1=duplicate:stamp-a-1");
  EXPECT_EQ(consumer_.booked(), 1);
  EXPECT_EQ(consumer_.duplicates(), 2);
  EXPECT_TRUE(Counted("outbox_duplicates_total 2"));
  EXPECT_EQ(queue_.acked.size(), 3u);
}

TEST_F(IdempotentConsumerTest, OneReplyAnswersSeveralMessagesAndEachIsAckedOnItsConfirm) {
  handler_.one_reply = true;
  queue_.Push(StampDelivery("m1", "a"));
  queue_.Push(StampDelivery("m2", "b"));
  ASSERT_TRUE(consumer_.Step());
  ASSERT_EQ(replies_.published.size(), 1u);
  EXPECT_EQ(replies_.published[0].body, "m1=new:stamp-a-1,m2=new:stamp-b-2");
  EXPECT_EQ(queue_.acked.size(), 2u);
}

TEST_F(IdempotentConsumerTest, AReplyNotConfirmedSendsBackEveryDeliveryItAnswers) {
  handler_.one_reply = true;
  replies_.answer = [](const OutgoingMessage& m) {
    return m.topic == "stamps.done" ? FakePublisher::Answer::kNack : FakePublisher::Answer::kAck;
  };
  const uint64_t t1 = queue_.Push(StampDelivery("m1", "a"));
  const uint64_t t2 = queue_.Push(StampDelivery("m2", "b"));
  const uint64_t other = queue_.Push(StampDelivery("m3", "c", 1, "stamps.other"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(queue_.acked, (std::set<uint64_t>{other}));
  EXPECT_EQ(queue_.requeued, (std::set<uint64_t>{t1, t2}));
  EXPECT_EQ(consumer_.requeued(), 2);
  // Redelivered: both duplicates, answered again in one reply.
  replies_.answer = [](const OutgoingMessage&) { return FakePublisher::Answer::kAck; };
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(consumer_.duplicates(), 2);
  EXPECT_THAT(absl::StrSplit(replies_.published.back().body, ','),
              ::testing::UnorderedElementsAre("m1=duplicate:stamp-a-1", "m2=duplicate:stamp-b-2"));
  EXPECT_EQ(Stamps(), 3);
  EXPECT_EQ(queue_.ready(), 0u);
}

TEST_F(IdempotentConsumerTest, AReplyNotConfirmedSendsItsDeliveryBackOnly) {
  replies_.answer = [](const OutgoingMessage& m) {
    return m.message_id == "m1.done" ? FakePublisher::Answer::kNack : FakePublisher::Answer::kAck;
  };
  const uint64_t t1 = queue_.Push(StampDelivery("m1", "a"));
  const uint64_t t2 = queue_.Push(StampDelivery("m2", "b"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(queue_.acked, (std::set<uint64_t>{t2}));
  EXPECT_EQ(queue_.requeued, (std::set<uint64_t>{t1}));
  // The reply connection is replaced: a nacking channel may stay stuck.
  EXPECT_FALSE(replies_.connected());
  EXPECT_EQ(replies_.drops(), 1);
  // Redelivered: found to be a duplicate and answered again.
  replies_.answer = [](const OutgoingMessage&) { return FakePublisher::Answer::kAck; };
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(consumer_.duplicates(), 1);
  EXPECT_EQ(Stamps(), 2);
  EXPECT_EQ(queue_.ready(), 0u);
}

// The confirm window: the next batch is taken and applied while the last
// one's replies wait for their confirms.
TEST_F(IdempotentConsumerTest, TheNextBatchIsAppliedWhileTheLastOnesRepliesAwaitTheirConfirms) {
  replies_.hold_confirms = true;
  const uint64_t t1 = queue_.Push(StampDelivery("m1", "a"));
  ASSERT_TRUE(consumer_.Step());  // applied and answered; not acked before the confirm
  EXPECT_EQ(consumer_.booked(), 1);
  EXPECT_TRUE(queue_.acked.empty());
  const uint64_t t2 = queue_.Push(StampDelivery("m2", "b"));
  ASSERT_TRUE(consumer_.Step());  // the next batch does not wait for it
  EXPECT_EQ(consumer_.booked(), 2);
  EXPECT_EQ(replies_.published.size(), 2u);
  EXPECT_TRUE(queue_.acked.empty());
  replies_.hold_confirms = false;
  ASSERT_TRUE(consumer_.Step());  // both confirms: both acked
  EXPECT_EQ(queue_.acked, (std::set<uint64_t>{t1, t2}));
  EXPECT_TRUE(queue_.requeued.empty());
}

// An ack with `multiple` covers only the answered prefix: a later batch
// confirmed first waits for the earlier one, and once the earlier reply is
// given up on, the later delivery is acked alone and the earlier requeued.
TEST_F(IdempotentConsumerTest, AnAckWithMultipleNeverReachesADeliveryStillWaiting) {
  replies_.answer = [](const OutgoingMessage& m) {
    return m.message_id == "m1.done" ? FakePublisher::Answer::kSilent : FakePublisher::Answer::kAck;
  };
  const uint64_t t1 = queue_.Push(StampDelivery("m1", "a"));
  ASSERT_TRUE(consumer_.Step());
  const uint64_t t2 = queue_.Push(StampDelivery("m2", "b"));
  ASSERT_TRUE(consumer_.Step());  // m2's reply is confirmed, m1's is not
  EXPECT_TRUE(queue_.acked.empty());
  EXPECT_TRUE(queue_.requeued.empty());

  clock_.Advance(Options().confirm_timeout + absl::Seconds(1));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(queue_.acked, (std::set<uint64_t>{t2}));
  EXPECT_EQ(queue_.requeued, (std::set<uint64_t>{t1}));
  EXPECT_EQ(replies_.drops(), 1);  // a channel that stops confirming is replaced
}

TEST_F(IdempotentConsumerTest, RepliesNeverConfirmedSendTheirDeliveriesBack) {
  replies_.hold_confirms = true;
  const uint64_t t1 = queue_.Push(StampDelivery("m1", "a"));
  ASSERT_TRUE(consumer_.Step());
  // No confirm within the timeout: the channel is stuck; replaced, and the
  // delivery goes back to be answered again.
  for (int i = 0; i < 1000 && queue_.requeued.empty(); ++i) ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(queue_.requeued, (std::set<uint64_t>{t1}));
  EXPECT_TRUE(queue_.acked.empty());
  EXPECT_EQ(replies_.drops(), 1);
}

// A store outage spends none of a message's deliveries (RabbitMQ 4.0
// dead-letters a quorum queue's message returned 20 times): the refused
// batch is kept, unacked, and applied again after a pause that doubles.
TEST_F(IdempotentConsumerTest, ABatchTheStoreRefusesIsKeptAndAppliedAgainNeverRequeued) {
  handler_.fail_apply = absl::UnavailableError("disk I/O error");
  queue_.Push(StampDelivery("m0", "z"));
  queue_.Push(StampDelivery("m1", "a"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(handler_.applies, 1);
  EXPECT_TRUE(replies_.published.empty());
  EXPECT_EQ(Stamps(), 0);
  EXPECT_EQ(CountRows(*file_, "inbox"), 0);

  queue_.Push(StampDelivery("m2", "b"));  // arrives during the pause: held too
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(handler_.applies, 1);  // 200 ms have not passed
  clock_.Advance(absl::Milliseconds(200));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(handler_.applies, 2);  // refused again: now 400 ms
  clock_.Advance(absl::Milliseconds(200));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(handler_.applies, 2);

  handler_.fail_apply = absl::OkStatus();
  clock_.Advance(absl::Milliseconds(200));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(Stamps(), 3);
  EXPECT_EQ(consumer_.booked(), 3);
  EXPECT_EQ(replies_.published.size(), 3u);
  EXPECT_EQ(queue_.acked.size(), 3u);
  EXPECT_TRUE(queue_.requeued.empty());
  EXPECT_EQ(consumer_.requeued(), 0);
  EXPECT_TRUE(Counted("outbox_store_write_failures_total{write=\"apply_batch\"} 2"));
}

TEST_F(IdempotentConsumerTest, TheRetryPauseStopsGrowingAtItsMaximum) {
  ConsumerOptions options = Options();
  options.store_retry_max = absl::Milliseconds(500);
  IdempotentConsumer consumer(queue_, replies_, handler_, clock_, metrics_, options);
  handler_.fail_apply = absl::UnavailableError("database or disk is full");
  queue_.Push(StampDelivery("m1", "a"));
  ASSERT_TRUE(consumer.Step());  // refused: 200 ms
  for (absl::Duration pause : {absl::Milliseconds(200), absl::Milliseconds(400),
                               absl::Milliseconds(500), absl::Milliseconds(500)}) {
    const int before = handler_.applies;
    clock_.Advance(pause - absl::Milliseconds(1));
    ASSERT_TRUE(consumer.Step());
    EXPECT_EQ(handler_.applies, before) << pause;
    clock_.Advance(absl::Milliseconds(1));
    ASSERT_TRUE(consumer.Step());
    EXPECT_EQ(handler_.applies, before + 1) << pause;
  }
  EXPECT_TRUE(queue_.requeued.empty());
}

TEST_F(IdempotentConsumerTest, ALostConnectionDropsTheHeldBatchForTheBrokerToRedeliver) {
  handler_.fail_apply = absl::UnavailableError("disk I/O error");
  queue_.Push(StampDelivery("m1", "a"));
  ASSERT_TRUE(consumer_.Step());
  queue_.Drop();
  ASSERT_TRUE(consumer_.Step());  // the wait fails: the broker has the delivery back
  EXPECT_EQ(queue_.ready(), 1u);
  handler_.fail_apply = absl::OkStatus();
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(consumer_.Step());
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(Stamps(), 1);
  EXPECT_EQ(consumer_.booked(), 1);
  EXPECT_EQ(replies_.published.size(), 1u);
}

TEST_F(IdempotentConsumerTest, WhatCanNeverBeProcessedIsDeadLetteredOnceAndNeverRequeued) {
  Delivery junk = StampDelivery("junk", "x");
  junk.body = "\xff\xff";
  const uint64_t undecodable = queue_.Push(junk);
  const uint64_t anonymous = queue_.Push(StampDelivery("", "y"));
  queue_.Push(StampDelivery("m1", "a"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(queue_.rejected, (std::set<uint64_t>{undecodable, anonymous}));
  EXPECT_TRUE(queue_.requeued.empty());
  EXPECT_EQ(consumer_.dead_lettered(), 2);
  EXPECT_TRUE(Counted("outbox_dead_lettered_total{queue=\"stamps\"} 2"));
  EXPECT_EQ(Stamps(), 1);
  EXPECT_EQ(replies_.published.size(), 1u);
}

// The reasons logged with the dead letters while it lives, by message id.
// (The tests call Step on their own thread: the sink runs there.)
class DeadLetterReasons {
 public:
  DeadLetterReasons() {
    SetLogSink([this](const LogRecord& r) {
      if (r.event != "message_dead_lettered") return;
      std::string id, error;
      for (const LogField& f : r.fields) {
        if (f.first == "message_id") id = f.second;
        if (f.first == "error") error = f.second;
      }
      reasons_[id] = error;
    });
  }
  ~DeadLetterReasons() { SetLogSink(nullptr); }
  std::string of(const std::string& message_id) const {
    auto it = reasons_.find(message_id);
    return it == reasons_.end() ? "(not dead-lettered)" : it->second;
  }

 private:
  std::map<std::string, std::string> reasons_;
};

// stamps.key UNIQUE, and no applied_by_key: a second message about a key,
// under another message id, is refused by the store for good.
void UniqueKeys(SqliteFile& file) {
  ASSERT_OK(file.Write([](SQLite::Database& db) {
    db.exec("CREATE UNIQUE INDEX stamps_key ON stamps (key)");
    return absl::OkStatus();
  }));
}

// A full disk, for real: SQLite refuses (SQLITE_FULL) whatever would grow the
// file past `pages` (0: as big as it is now).
void LimitPages(SqliteFile& file, int64_t pages) {
  ASSERT_OK(file.WithWriter("max_page_count", [&](SQLite::Database& db) {
    if (pages == 0) pages = db.execAndGet("PRAGMA page_count").getInt64();
    db.execAndGet(absl::StrCat("PRAGMA max_page_count = ", pages));
    return absl::OkStatus();
  }));
}

// A message the store refuses for good would hold its batch, and every
// batch after it, for good: no delivery is spent while held. It is
// dead-lettered with the store's error; the others are applied and answered.
TEST_F(IdempotentConsumerTest, AMessageTheStoreRefusesForGoodIsDeadLetteredAndTheOthersApplied) {
  DeadLetterReasons reasons;
  UniqueKeys(*file_);
  queue_.Push(StampDelivery("m1", "a"));
  const uint64_t second = queue_.Push(StampDelivery("m2", "a"));
  queue_.Push(StampDelivery("m3", "b"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(queue_.rejected, (std::set<uint64_t>{second}));
  EXPECT_THAT(reasons.of("m2"), HasSubstr("UNIQUE constraint failed: stamps.key"));
  EXPECT_EQ(Stamps(), 2);
  ASSERT_EQ(replies_.published.size(), 2u);
  EXPECT_THAT(replies_.published[0].body, ::testing::StartsWith("m1=new:"));
  EXPECT_THAT(replies_.published[1].body, ::testing::StartsWith("m3=new:"));
  EXPECT_EQ(queue_.acked.size(), 2u);
  EXPECT_TRUE(queue_.requeued.empty());
  EXPECT_EQ(consumer_.booked(), 2);
  EXPECT_EQ(consumer_.dead_lettered(), 1);
  // Not a store outage: nothing held, nothing counted as one.
  EXPECT_TRUE(Counted("outbox_store_write_failures_total{write=\"apply_batch\"} 0"));
  queue_.Push(StampDelivery("m4", "c"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(Stamps(), 3);
  EXPECT_EQ(queue_.acked.size(), 3u);
}

TEST_F(IdempotentConsumerTest, ASecondMessageForAKeyInALaterBatchIsDeadLetteredAlone) {
  DeadLetterReasons reasons;
  UniqueKeys(*file_);
  queue_.Push(StampDelivery("m1", "a"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(consumer_.booked(), 1);
  const uint64_t second = queue_.Push(StampDelivery("m2", "a"));
  queue_.Push(StampDelivery("m3", "b"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(queue_.rejected, (std::set<uint64_t>{second}));
  EXPECT_THAT(reasons.of("m2"), HasSubstr("UNIQUE constraint failed: stamps.key"));
  EXPECT_EQ(Stamps(), 2);
  ASSERT_EQ(replies_.published.size(), 2u);
  EXPECT_THAT(replies_.published[1].body, ::testing::StartsWith("m3=new:"));
  EXPECT_EQ(queue_.acked.size(), 2u);
  EXPECT_TRUE(queue_.requeued.empty());
}

// Applying one at a time, the disk fills: what is left is held, not
// dead-lettered, and applied once there is room.
TEST_F(IdempotentConsumerTest, AFullDiskWhileMessagesAreAppliedAloneHoldsTheRestUntilThereIsRoom) {
  DeadLetterReasons reasons;
  UniqueKeys(*file_);
  const uint64_t first = queue_.Push(StampDelivery("m1", "a"));
  const uint64_t second = queue_.Push(StampDelivery("m2", "a"));
  const uint64_t big = queue_.Push(StampDelivery("m3", std::string(64 * 1024, 'k')));
  LimitPages(*file_, 0);
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(queue_.acked, (std::set<uint64_t>{first}));
  EXPECT_EQ(queue_.rejected, (std::set<uint64_t>{second}));
  EXPECT_EQ(reasons.of("m3"), "(not dead-lettered)");
  EXPECT_TRUE(Counted("outbox_store_write_failures_total{write=\"apply_batch\"} 1"));
  ASSERT_TRUE(consumer_.Step());  // held: its pause has not passed
  EXPECT_EQ(Stamps(), 1);

  LimitPages(*file_, 1 << 20);
  clock_.Advance(absl::Milliseconds(200));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(Stamps(), 2);
  EXPECT_EQ(queue_.acked, (std::set<uint64_t>{first, big}));
  EXPECT_EQ(queue_.rejected, (std::set<uint64_t>{second}));
  EXPECT_TRUE(queue_.requeued.empty());
  EXPECT_EQ(consumer_.dead_lettered(), 1);
  EXPECT_EQ(replies_.published.size(), 2u);
}

// A real lock held by another writer (SQLITE_BUSY past the busy timeout):
// held and applied later; nothing dead-lettered, nothing sent back.
TEST_F(IdempotentConsumerTest, AFileLockedByAnotherWriterHoldsTheBatchAndDeadLettersNothing) {
  DbOptions quick;
  quick.busy_timeout_ms = 1;
  const std::string path = dir_.path() + "/locked.db";
  auto file = OpenSqliteFile(path, quick, &StampSchema());
  ASSERT_OK(file);
  StampHandler handler(**file, clock_);
  IdempotentConsumer consumer(queue_, replies_, handler, clock_, metrics_, Options());
  auto other = OpenDatabase(path, DbOptions{});
  ASSERT_OK(other);
  (*other)->exec("BEGIN IMMEDIATE");
  queue_.Push(StampDelivery("m1", "a"));
  queue_.Push(StampDelivery("m2", "b"));
  ASSERT_TRUE(consumer.Step());
  EXPECT_TRUE(queue_.acked.empty());
  EXPECT_TRUE(queue_.rejected.empty());
  EXPECT_TRUE(queue_.requeued.empty());
  EXPECT_TRUE(replies_.published.empty());

  (*other)->exec("COMMIT");
  clock_.Advance(absl::Milliseconds(200));
  ASSERT_TRUE(consumer.Step());
  EXPECT_EQ(CountRows(**file, "stamps"), 2);
  EXPECT_EQ(queue_.acked.size(), 2u);
  EXPECT_TRUE(queue_.rejected.empty());
  EXPECT_TRUE(queue_.requeued.empty());
  EXPECT_EQ(consumer.dead_lettered(), 0);
}

// An adopter's exception ends nothing: thrown while decoding, the message
// is dead-lettered; while applying, it is an error like any other.
TEST_F(IdempotentConsumerTest, AnAdoptersExceptionDeadLettersItsMessageAndEndsNothing) {
  DeadLetterReasons reasons;
  handler_.decode_throws = "x";
  handler_.apply_throws = "y";
  queue_.Push(StampDelivery("m1", "a"));
  const uint64_t undecodable = queue_.Push(StampDelivery("m2", "x"));
  const uint64_t unapplicable = queue_.Push(StampDelivery("m3", "y"));
  queue_.Push(StampDelivery("m4", "b"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(queue_.rejected, (std::set<uint64_t>{undecodable, unapplicable}));
  EXPECT_THAT(reasons.of("m2"), HasSubstr("Decode broke on x"));
  EXPECT_THAT(reasons.of("m3"), HasSubstr("Apply broke on y"));
  EXPECT_EQ(Stamps(), 2);
  EXPECT_EQ(replies_.published.size(), 2u);
  EXPECT_EQ(queue_.acked.size(), 2u);
  EXPECT_TRUE(queue_.requeued.empty());
}

// Replies that throw: each message is answered alone; the one whose reply
// cannot be made is dead-lettered (applied: its publisher sends it again).
TEST_F(IdempotentConsumerTest, RepliesThatThrowAnswerEachMessageAloneAndDeadLetterTheOneThatFails) {
  DeadLetterReasons reasons;
  handler_.replies_throw = "x";
  queue_.Push(StampDelivery("m1", "a"));
  const uint64_t unanswerable = queue_.Push(StampDelivery("m2", "x"));
  queue_.Push(StampDelivery("m3", "b"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(Stamps(), 3);
  EXPECT_EQ(queue_.rejected, (std::set<uint64_t>{unanswerable}));
  EXPECT_THAT(reasons.of("m2"), HasSubstr("Replies broke on x"));
  ASSERT_EQ(replies_.published.size(), 2u);
  EXPECT_THAT(replies_.published[0].body, ::testing::StartsWith("m1=new:"));
  EXPECT_THAT(replies_.published[1].body, ::testing::StartsWith("m3=new:"));
  EXPECT_EQ(queue_.acked.size(), 2u);
}

TEST_F(IdempotentConsumerTest, WithKeysAForgedOrUnsignedMessageAppliesNothingAndIsDeadLettered) {
  auto keys = MessageKeys::Parse("k1 0123456789abcdef0123456789abcdef");
  ASSERT_OK(keys);
  auto forger = MessageKeys::Parse("k1 not-the-secret-not-the-secret-not-the");
  ASSERT_OK(forger);
  ConsumerOptions options = Options();
  options.keys = &*keys;
  IdempotentConsumer consumer(queue_, replies_, handler_, clock_, metrics_, options);
  const uint64_t unsigned_tag = queue_.Push(StampDelivery("m1", "a"));
  const uint64_t forged_tag = queue_.Push(SignedBy(*forger, StampDelivery("m2", "b")));
  Delivery redirected = SignedBy(*keys, StampDelivery("m3", "c"));
  redirected.reply_to = "stamps.attacker";  // signed for stamps.done, sent elsewhere
  const uint64_t redirected_tag = queue_.Push(redirected);
  const uint64_t good = queue_.Push(SignedBy(*keys, StampDelivery("m4", "d")));
  ASSERT_TRUE(consumer.Step());
  EXPECT_EQ(Stamps(), 1);
  EXPECT_EQ(queue_.rejected, (std::set<uint64_t>{unsigned_tag, forged_tag, redirected_tag}));
  EXPECT_EQ(queue_.acked, (std::set<uint64_t>{good}));
  EXPECT_EQ(consumer.unauthenticated(), 3);
  EXPECT_EQ(consumer.dead_lettered(), 3);
  ASSERT_EQ(replies_.published.size(), 1u);  // only the signed message is answered
  EXPECT_EQ(replies_.published[0].body, "m4=new:stamp-d-1");
}

TEST_F(IdempotentConsumerTest, AReplyToThatIsNoQueueIsDeadLetteredBeforeAnythingIsApplied) {
  replies_.missing = {"nowhere"};
  const uint64_t bad = queue_.Push(StampDelivery("m1", "a", 1, "nowhere"));
  const uint64_t fine = queue_.Push(StampDelivery("m2", "b"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(queue_.rejected, (std::set<uint64_t>{bad}));
  EXPECT_EQ(queue_.acked, (std::set<uint64_t>{fine}));
  EXPECT_EQ(handler_.applies, 1);  // nothing applied for m1
  EXPECT_EQ(consumer_.dead_lettered(), 1);
  // Known queues are checked once, not per message.
  const int inspections = replies_.inspections;
  queue_.Push(StampDelivery("m3", "c"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(replies_.inspections, inspections);
}

// A reply the broker returns (its reply_to routes nowhere): the change
// stands, the delivery is poison and is dead-lettered, never redelivered.
TEST_F(IdempotentConsumerTest, AnUnroutableReplyToIsPoisonToo) {
  replies_.answer = [](const OutgoingMessage& m) {
    return m.topic == "nowhere" ? FakePublisher::Answer::kReturn : FakePublisher::Answer::kAck;
  };
  const uint64_t lost = queue_.Push(StampDelivery("m1", "a", 1, "nowhere"));
  const uint64_t fine = queue_.Push(StampDelivery("m2", "b"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(queue_.rejected, (std::set<uint64_t>{lost}));
  EXPECT_EQ(queue_.acked, (std::set<uint64_t>{fine}));
  EXPECT_EQ(consumer_.dead_lettered(), 1);
}

TEST_F(IdempotentConsumerTest, NoDeliveriesAreTakenWhileRepliesCannotBeSent) {
  replies_.reachable = false;
  queue_.Push(StampDelivery("m1", "a"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(queue_.ready(), 1u);
  EXPECT_EQ(queue_.connects, 0);
  EXPECT_EQ(Stamps(), 0);
}

TEST_F(IdempotentConsumerTest, ALostReplyConnectionRequeuesAndReconnects) {
  queue_.Push(StampDelivery("m1", "a"));
  ASSERT_OK(replies_.Connect());
  replies_.Drop();
  ASSERT_TRUE(consumer_.Step());  // applied, but the reply could not be published
  EXPECT_EQ(queue_.requeued.size(), 1u);
  ASSERT_TRUE(consumer_.Step());  // reconnected: the redelivery is a duplicate, answered
  EXPECT_EQ(replies_.published.size(), 1u);
  EXPECT_EQ(consumer_.duplicates(), 1);
  EXPECT_EQ(replies_.connects, 2);
  EXPECT_EQ(Stamps(), 1);
}

// Rejects: a new message the rules refuse is answered with a reject, or
// dead-lettered for a publisher that understands no rejects; nothing is
// written for either.
TEST_F(IdempotentConsumerTest,
       ANewMessageTheRulesRefuseIsRejectedOrForOlderPublishersDeadLettered) {
  queue_.Push(StampDelivery("m1", "a", 5));
  queue_.Push(StampDelivery("m2", "b", 500));
  const uint64_t old = queue_.Push(StampDelivery("old", "c", 500, "stamps.done", "StampV1"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(Stamps(), 1);
  EXPECT_EQ(queue_.rejected, (std::set<uint64_t>{old}));
  ASSERT_EQ(replies_.published.size(), 2u);
  EXPECT_EQ(replies_.published[1].body, "m2=rejected:count 500 over 100");
  EXPECT_EQ(queue_.acked.size(), 2u);
  EXPECT_EQ(consumer_.rejected(), 1);
  EXPECT_EQ(consumer_.dead_lettered(), 1);
  EXPECT_TRUE(Counted("outbox_consumer_rejected_total 1"));
}

// Applied, then the consumer restarts with tighter rules before its replies
// were confirmed: the redelivered copies are answered as applied, with their
// reference, whatever today's rules say (a reject would tell the publisher
// the change was never made). Nothing is applied twice or dead-lettered; a
// new message is still judged by today's rules.
TEST_F(IdempotentConsumerTest, AMessageAppliedBeforeIsAnsweredAsAppliedUnderTighterRules) {
  queue_.Push(StampDelivery("m1", "a", 50));
  queue_.Push(StampDelivery("old", "b", 50, "stamps.done", "StampV1"));
  ASSERT_TRUE(consumer_.Step());
  ASSERT_EQ(Stamps(), 2);

  StampHandler tighter(*file_, clock_);
  tighter.limit = 10;
  FakeConsumer redelivered;
  FakePublisher replies;
  MetricsRegistry metrics;
  IdempotentConsumer restarted(redelivered, replies, tighter, clock_, metrics, Options());
  redelivered.Push(StampDelivery("m1", "a", 50));
  redelivered.Push(StampDelivery("old", "b", 50, "stamps.done", "StampV1"));
  redelivered.Push(StampDelivery("m2", "c", 50));
  const uint64_t old_new =
      redelivered.Push(StampDelivery("old2", "d", 50, "stamps.done", "StampV1"));
  ASSERT_TRUE(restarted.Step());

  EXPECT_EQ(Stamps(), 2);
  EXPECT_EQ(redelivered.rejected, (std::set<uint64_t>{old_new}));
  ASSERT_EQ(replies.published.size(), 3u);
  EXPECT_EQ(replies.published[0].body, "m1=duplicate:stamp-a-1");
  EXPECT_EQ(replies.published[1].body, "old=duplicate:stamp-b-2");
  EXPECT_EQ(replies.published[2].body, "m2=rejected:count 50 over 10");
  EXPECT_EQ(restarted.duplicates(), 2);
  EXPECT_EQ(restarted.rejected(), 1);
  EXPECT_EQ(redelivered.acked.size(), 3u);
}

// With a linger, a small batch waits for what arrives meanwhile: one
// transaction and one reply for both.
TEST_F(IdempotentConsumerTest, ASmallBatchLingersForWhatArrivesMeanwhile) {
  handler_.one_reply = true;
  ConsumerOptions options = Options();
  options.linger = absl::Seconds(30);  // ended by the full batch or an empty wait, not by time
  options.prefetch = 2;
  IdempotentConsumer consumer(queue_, replies_, handler_, clock_, metrics_, options);
  queue_.Push(StampDelivery("m1", "a"));
  queue_.on_next = [&](int n) {
    if (n == 2) queue_.Push(StampDelivery("m2", "b"));
  };
  ASSERT_TRUE(consumer.Step());
  EXPECT_EQ(queue_.nexts, 2);  // the second take filled the batch (prefetch 2)
  EXPECT_EQ(Stamps(), 2);
  ASSERT_EQ(replies_.published.size(), 1u);
  EXPECT_EQ(replies_.published[0].body, "m1=new:stamp-a-1,m2=new:stamp-b-2");
  EXPECT_EQ(queue_.acked.size(), 2u);
  EXPECT_EQ(consumer.lingers(), 1);
}

// Once it holds linger_batch, it stops waiting and takes what else is
// already there, up to the prefetch.
TEST_F(IdempotentConsumerTest, ALingerEndsAtItsBatchSizeWithWhatElseIsWaiting) {
  handler_.one_reply = true;
  ConsumerOptions options = Options();
  options.linger = absl::Seconds(30);
  options.linger_batch = 4;
  IdempotentConsumer consumer(queue_, replies_, handler_, clock_, metrics_, options);
  queue_.Push(StampDelivery("m1", "k1"));
  queue_.on_next = [&](int n) {
    if (n != 2) return;
    for (int i = 2; i <= 6; ++i) {
      queue_.Push(StampDelivery(absl::StrCat("m", i), absl::StrCat("k", i)));
    }
  };
  ASSERT_TRUE(consumer.Step());
  EXPECT_EQ(queue_.nexts, 3);  // the first, the linger's (to 4), the rest (5 and 6)
  EXPECT_EQ(Stamps(), 6);
  ASSERT_EQ(replies_.published.size(), 1u);
  EXPECT_EQ(queue_.acked.size(), 6u);
}

// Without one (the default), the batch is what was waiting; and a batch
// that starts with linger_batch (4) or more is taken at once even with a linger.
TEST_F(IdempotentConsumerTest, NoLingerOrABigBatchIsTakenAtOnce) {
  queue_.Push(StampDelivery("m1", "a"));
  queue_.on_next = [&](int n) {
    if (n == 2) queue_.Push(StampDelivery("m2", "b"));
  };
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(queue_.nexts, 1);
  EXPECT_EQ(Stamps(), 1);
  EXPECT_EQ(consumer_.lingers(), 0);

  ConsumerOptions options = Options();
  options.linger = absl::Seconds(30);
  IdempotentConsumer lingering(queue_, replies_, handler_, clock_, metrics_, options);
  for (int i = 0; i < 4; ++i) {
    queue_.Push(StampDelivery(absl::StrCat("b", i), absl::StrCat("kb", i)));
  }
  queue_.nexts = 0;
  queue_.on_next = nullptr;
  ASSERT_TRUE(lingering.Step());
  EXPECT_EQ(queue_.nexts, 1);
  EXPECT_EQ(Stamps(), 5);  // m1 and the 4
  EXPECT_EQ(lingering.lingers(), 0);
}

}  // namespace
}  // namespace outbox::testing
