#include "shared/outbox/internal/ack_listener.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "shared/base/status_macros.h"
#include "shared/outbox/internal/failure.h"
#include "shared/outbox/internal/reply_format.h"
#include "shared/outbox/internal/state_machine.h"
#include "shared/testing/fakes.h"
#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

using ::outbox::testing::FakeConsumer;
using ::outbox::testing::InMemoryOutbox;
using ::outbox::testing::ManualClock;
using ::outbox::testing::SignedBy;

// A reply's body in these tests: "ack <message id>[,<message id>...]", one
// or many (a cumulative acknowledgement); "<message id>!<reason>" is a
// business reject. A service's codec reads its own
// protobuf instead.
Delivery Reply(const std::string& message_id) {
  Delivery d;
  d.message_id = message_id;
  d.body = "ack " + message_id;
  return d;
}

absl::StatusOr<std::vector<Acknowledgement>> DecodeReply(const Delivery& reply) {
  absl::string_view ids = reply.body;
  if (!absl::ConsumePrefix(&ids, "ack ") || ids.empty()) {
    return absl::InvalidArgumentError("not a reply");
  }
  std::vector<Acknowledgement> acks;
  for (absl::string_view id : absl::StrSplit(ids, ',')) {
    if (id.empty()) return absl::InvalidArgumentError("an empty message id");
    std::vector<std::string> parts = absl::StrSplit(id, absl::MaxSplits('!', 1));
    Acknowledgement ack{parts[0], "p-" + parts[0], false};
    if (parts.size() == 2) ack.rejected_reason = parts[1];
    acks.push_back(std::move(ack));
  }
  return acks;
}

class AckListenerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* id : {"m1", "m2", "m3"}) {
      outbox_.Add(NewOutboxMessage({id, "order", id, "EVENTS", "OrderPlaced", "REPLIES", ""},
                                   clock_.NowMillis(), RetryPolicy{}));
    }
  }

  ManualClock clock_;
  FakeConsumer queue_;
  InMemoryOutbox outbox_{clock_};
  MetricsRegistry metrics_;
  AckListener listener_{queue_, outbox_, DecodeReply, metrics_, {"REPLIES", 256}};
};

TEST_F(AckListenerTest, ABatchOfRepliesClosesItsRowsThenIsAcked) {
  const uint64_t t1 = queue_.Push(Reply("m1"));
  const uint64_t t2 = queue_.Push(Reply("m2"));
  clock_.Advance(absl::Milliseconds(1500));
  ASSERT_TRUE(listener_.Step());
  EXPECT_EQ(outbox_.Row("m1").status, OutboxStatus::kSent);
  EXPECT_EQ(outbox_.Row("m2").status, OutboxStatus::kSent);
  EXPECT_EQ(outbox_.Row("m3").status, OutboxStatus::kSending);
  EXPECT_EQ(queue_.acked, (std::set<uint64_t>{t1, t2}));
  EXPECT_EQ(listener_.acknowledged(), 2);
  // Each row closed, from its commit: whatever store tallied it.
  const std::string text = metrics_.Render();
  EXPECT_NE(text.find("\noutbox_create_to_sent_seconds_count 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\noutbox_create_to_sent_seconds_sum 3\n"), std::string::npos) << text;
}

TEST_F(AckListenerTest, ACumulativeReplyClosesEveryRowItListsLateOnesToo) {
  OutboxMessage failed =
      NewOutboxMessage({"f1", "order", "f1", "EVENTS", "OrderPlaced", "REPLIES", ""},
                       clock_.NowMillis(), RetryPolicy{});
  failed.status = OutboxStatus::kFailed;
  outbox_.Add(failed);
  const uint64_t single = queue_.Push(Reply("m3"));
  const uint64_t cumulative = queue_.Push(Reply("m1,f1,m2,unknown"));
  ASSERT_TRUE(listener_.Step());
  for (const char* id : {"m1", "m2", "m3", "f1"}) {
    EXPECT_EQ(outbox_.Row(id).status, OutboxStatus::kSent) << id;
  }
  EXPECT_EQ(queue_.acked, (std::set<uint64_t>{single, cumulative}));
  EXPECT_EQ(listener_.replies(), 2);
  EXPECT_EQ(listener_.acknowledged(), 4);
  EXPECT_EQ(listener_.late(), 1);
  EXPECT_EQ(listener_.harmless(), 1);
  EXPECT_NE(metrics_.Render().find("outbox_ack_messages_total 2"), std::string::npos);
}

// A business reject closes its row FAILED at once, with the reason, next
// to acknowledgements in the same reply; a copy of the reject is harmless.
TEST_F(AckListenerTest, ARejectClosesItsRowFailedAtOnce) {
  const uint64_t tag = queue_.Push(Reply("m1,m2!amount 5 over 4"));
  const uint64_t again = queue_.Push(Reply("m2!amount 5 over 4"));
  ASSERT_TRUE(listener_.Step());
  EXPECT_EQ(outbox_.Row("m1").status, OutboxStatus::kSent);
  const OutboxMessage& rejected = outbox_.Row("m2");
  EXPECT_EQ(rejected.status, OutboxStatus::kFailed);
  EXPECT_EQ(rejected.failure_kind, kFailureRejected);
  EXPECT_EQ(rejected.last_error, "amount 5 over 4");
  EXPECT_EQ(rejected.attempts, 1);
  EXPECT_EQ(queue_.acked, (std::set<uint64_t>{tag, again}));
  EXPECT_EQ(listener_.rejected(), 1);
  EXPECT_EQ(listener_.acknowledged(), 1);
  EXPECT_EQ(listener_.harmless(), 1);
  EXPECT_NE(metrics_.Render().find("outbox_acks_total{result=\"rejected\"} 1"), std::string::npos);
}

TEST_F(AckListenerTest, ACumulativeReplyWithABadEntryIsDeadLetteredWhole) {
  const uint64_t bad = queue_.Push(Reply("m1,,m2"));
  ASSERT_TRUE(listener_.Step());
  EXPECT_EQ(queue_.rejected, (std::set<uint64_t>{bad}));
  EXPECT_EQ(outbox_.Row("m1").status, OutboxStatus::kSending);
  EXPECT_EQ(outbox_.Row("m2").status, OutboxStatus::kSending);
  EXPECT_EQ(listener_.dead_lettered(), 1);
}

TEST_F(AckListenerTest, ALateReplyClosesAFailedRowAndIsCounted) {
  OutboxMessage failed =
      NewOutboxMessage({"f1", "order", "f1", "EVENTS", "OrderPlaced", "REPLIES", ""},
                       clock_.NowMillis(), RetryPolicy{});
  failed.status = OutboxStatus::kFailed;
  failed.last_error = "no acknowledgement";
  outbox_.Add(failed);
  queue_.Push(Reply("f1"));
  queue_.Push(Reply("m1"));
  ASSERT_TRUE(listener_.Step());
  EXPECT_EQ(outbox_.Row("f1").status, OutboxStatus::kSent);
  EXPECT_EQ(outbox_.Row("f1").last_error, "no acknowledgement");
  EXPECT_EQ(listener_.acknowledged(), 2);
  EXPECT_EQ(listener_.late(), 1);
  EXPECT_EQ(listener_.harmless(), 0);
  EXPECT_NE(metrics_.Render().find("outbox_late_acks_total 1"), std::string::npos);
}

TEST_F(AckListenerTest, DuplicateAndUnknownRepliesAreHarmless) {
  queue_.Push(Reply("m1"));
  queue_.Push(Reply("m1"));
  queue_.Push(Reply("other-shard"));
  ASSERT_TRUE(listener_.Step());
  EXPECT_EQ(listener_.acknowledged(), 1);
  EXPECT_EQ(listener_.harmless(), 2);
  EXPECT_EQ(queue_.acked.size(), 3u);
}

TEST_F(AckListenerTest, PoisonIsDeadLetteredAndCountedWhileTheRestIsAcked) {
  Delivery poison;
  poison.message_id = "junk";
  poison.body = "\xff\xff";
  const uint64_t bad = queue_.Push(poison);
  const uint64_t good = queue_.Push(Reply("m2"));
  ASSERT_TRUE(listener_.Step());
  EXPECT_EQ(queue_.rejected, (std::set<uint64_t>{bad}));
  EXPECT_EQ(queue_.acked, (std::set<uint64_t>{good}));
  EXPECT_EQ(listener_.dead_lettered(), 1);
  EXPECT_NE(metrics_.Render().find("outbox_dead_lettered_total{queue=\"REPLIES\"} 1"),
            std::string::npos);
  EXPECT_EQ(outbox_.Row("m2").status, OutboxStatus::kSent);
}

TEST_F(AckListenerTest, WithKeysAForgedOrUnsignedReplyClosesNothingAndIsDeadLettered) {
  auto keys = MessageKeys::Parse("k1 0123456789abcdef0123456789abcdef");
  ASSERT_OK(keys);
  auto forger = MessageKeys::Parse("k1 not-the-secret-not-the-secret-not-the");
  ASSERT_OK(forger);
  AckListener listener(queue_, outbox_, DecodeReply, metrics_, {"REPLIES", 256, &*keys});
  const uint64_t unsigned_tag = queue_.Push(Reply("m1"));
  const uint64_t forged_tag = queue_.Push(SignedBy(*forger, Reply("m3")));
  const uint64_t good = queue_.Push(SignedBy(*keys, Reply("m2")));
  ASSERT_TRUE(listener.Step());
  EXPECT_EQ(outbox_.Row("m1").status, OutboxStatus::kSending);
  EXPECT_EQ(outbox_.Row("m3").status, OutboxStatus::kSending);
  EXPECT_EQ(outbox_.Row("m2").status, OutboxStatus::kSent);
  EXPECT_EQ(queue_.rejected, (std::set<uint64_t>{unsigned_tag, forged_tag}));
  EXPECT_EQ(queue_.acked, (std::set<uint64_t>{good}));
  EXPECT_EQ(listener.unauthenticated(), 2);
  EXPECT_NE(metrics_.Render().find("outbox_unauthenticated_messages_total{queue=\"REPLIES\"} 2"),
            std::string::npos);
}

// A reply closes only the round it answers: a signed reject of the copy sent
// before an operator's re-drive, arriving after it (late, or replayed by
// someone who can publish to the broker), leaves the re-driven row SENDING;
// the consumer's reject of the re-driven copy fails it. Replies in the
// library's format say when they were answered (DefaultReply).
TEST_F(AckListenerTest, ARejectMadeBeforeARedriveLeavesTheRedrivenRowSending) {
  auto keys = MessageKeys::Parse("k1 0123456789abcdef0123456789abcdef");
  ASSERT_OK(keys);
  AckListener listener(queue_, outbox_, DecodeDefaultReply, metrics_, {"REPLIES", 256, &*keys});
  Applied no;
  no.rejected_reason = "quantity 101 over 100";
  const int64_t before = clock_.NowMillis();
  const Delivery old_reject =
      SignedBy(*keys, testing::DeliveryOf(DefaultReply("REPLIES", "m1", "", no, before)));
  queue_.Push(old_reject);
  ASSERT_TRUE(listener.Step());
  ASSERT_EQ(outbox_.Row("m1").status, OutboxStatus::kFailed);

  clock_.Advance(absl::Seconds(30));
  OutboxMessage row = outbox_.Row("m1");
  ASSERT_OK(OnRedrive(row, clock_.NowMillis()));
  outbox_.Add(row);
  queue_.Push(old_reject);
  ASSERT_TRUE(listener.Step());
  EXPECT_EQ(outbox_.Row("m1").status, OutboxStatus::kSending);
  EXPECT_EQ(listener.rejected(), 1);
  EXPECT_EQ(listener.harmless(), 1);

  clock_.Advance(absl::Seconds(1));
  queue_.Push(SignedBy(
      *keys, testing::DeliveryOf(DefaultReply("REPLIES", "m1", "", no, clock_.NowMillis()))));
  ASSERT_TRUE(listener.Step());
  EXPECT_EQ(outbox_.Row("m1").status, OutboxStatus::kFailed);
  EXPECT_EQ(outbox_.Row("m1").failure_kind, kFailureRejected);
  EXPECT_EQ(listener.rejected(), 2);
}

// A reply of a consumer of an earlier release says no time ("<id>.reply"):
// it is taken as before, whatever the row's restarts.
TEST_F(AckListenerTest, AReplyThatSaysNoTimeIsTakenAsBefore) {
  Applied no;
  no.rejected_reason = "quantity 101 over 100";
  OutgoingMessage reply = DefaultReply("REPLIES", "m1", "", no);
  EXPECT_EQ(reply.message_id, "m1.reply");
  auto acks = DecodeDefaultReply(testing::DeliveryOf(reply));
  ASSERT_OK(acks);
  EXPECT_EQ((*acks)[0].answered_at, 0);
  acks = DecodeDefaultReply(testing::DeliveryOf(DefaultReply("REPLIES", "m1", "", no, 1234)));
  ASSERT_OK(acks);
  EXPECT_EQ((*acks)[0].answered_at, 1234);

  AckListener listener(queue_, outbox_, DecodeDefaultReply, metrics_, {"REPLIES", 256});
  OutboxMessage row = outbox_.Row("m1");
  row.status = OutboxStatus::kFailed;
  clock_.Advance(absl::Seconds(30));
  ASSERT_OK(OnRedrive(row, clock_.NowMillis()));
  outbox_.Add(row);
  queue_.Push(testing::DeliveryOf(reply));
  ASSERT_TRUE(listener.Step());
  EXPECT_EQ(outbox_.Row("m1").status, OutboxStatus::kFailed);
}

// A store outage spends none of a reply's deliveries (RabbitMQ 4.0
// dead-letters a quorum queue's message returned 20 times): the replies are
// kept, unacked, and recorded again after a pause that doubles.
TEST_F(AckListenerTest, WhenRowsCannotBeMarkedTheRepliesAreHeldAndRecordedAgain) {
  AckListenerOptions options{"REPLIES", 256};
  options.clock = &clock_;
  AckListener listener(queue_, outbox_, DecodeReply, metrics_, options);
  outbox_.fail_with = absl::UnavailableError("database is locked");
  queue_.Push(Reply("m1"));
  queue_.Push(Reply("m2"));
  ASSERT_TRUE(listener.Step());
  EXPECT_TRUE(queue_.acked.empty());
  EXPECT_TRUE(queue_.requeued.empty());
  queue_.Push(Reply("m3"));  // arrives during the pause: held too
  ASSERT_TRUE(listener.Step());
  clock_.Advance(absl::Milliseconds(200));
  ASSERT_TRUE(listener.Step());  // refused again: now 400 ms
  outbox_.fail_with = absl::OkStatus();
  clock_.Advance(absl::Milliseconds(200));
  ASSERT_TRUE(listener.Step());
  EXPECT_EQ(outbox_.Row("m1").status, OutboxStatus::kSending);
  clock_.Advance(absl::Milliseconds(200));
  ASSERT_TRUE(listener.Step());
  for (const char* id : {"m1", "m2", "m3"}) EXPECT_EQ(outbox_.Row(id).status, OutboxStatus::kSent);
  EXPECT_EQ(queue_.acked.size(), 3u);
  EXPECT_TRUE(queue_.requeued.empty());
  EXPECT_EQ(queue_.ready(), 0u);
  EXPECT_TRUE(queue_.rejected.empty());
  EXPECT_NE(metrics_.Render().find("outbox_store_write_failures_total{write=\"record_acks\"} 2\n"),
            std::string::npos);
}

// Refuses every write that names a message id of `refuse` with its status
// (or throws, for "throw"), as a store or an adopter's repository might;
// passes the rest on.
class RefusingOutbox : public OutboxRepository {
 public:
  explicit RefusingOutbox(OutboxRepository& inner) : inner_(inner) {}
  absl::StatusOr<AckTally> RecordAcks(const std::vector<std::string>& message_ids) override {
    RETURN_IF_ERROR(Refusal(message_ids));
    return inner_.RecordAcks(message_ids);
  }
  absl::StatusOr<int> RecordRejects(const std::vector<Rejection>& rejects) override {
    std::vector<std::string> ids;
    for (const Rejection& r : rejects) ids.push_back(r.message_id);
    RETURN_IF_ERROR(Refusal(ids));
    return inner_.RecordRejects(rejects);
  }
  absl::Status RecordPublishFailure(const std::vector<std::string>& ids,
                                    const std::string& error) override {
    return inner_.RecordPublishFailure(ids, error);
  }
  absl::StatusOr<std::vector<std::string>> TakenOver(const std::vector<std::string>& ids) override {
    return inner_.TakenOver(ids);
  }
  std::map<std::string, absl::Status> refuse;
  std::set<std::string> throw_for;

 private:
  absl::Status Refusal(const std::vector<std::string>& ids) {
    for (const std::string& id : ids) {
      if (throw_for.count(id)) throw std::runtime_error("RecordAcks broke on " + id);
      auto it = refuse.find(id);
      if (it != refuse.end()) return it->second;
    }
    return absl::OkStatus();
  }
  OutboxRepository& inner_;
};

// A reply whose rows can never be written would hold the listener for good
// (no delivery is spent while held): it is dead-lettered with the error,
// and the others are recorded and acked.
TEST_F(AckListenerTest, AReplyThatCanNeverBeRecordedIsDeadLetteredAndTheOthersAreRecorded) {
  RefusingOutbox refusing(outbox_);
  refusing.refuse["m2"] = absl::InternalError("CHECK constraint failed: outbox");
  AckListenerOptions options{"REPLIES", 256};
  options.clock = &clock_;
  AckListener listener(queue_, refusing, DecodeReply, metrics_, options);
  const uint64_t t1 = queue_.Push(Reply("m1"));
  const uint64_t t2 = queue_.Push(Reply("m2"));
  const uint64_t t3 = queue_.Push(Reply("m3"));
  ASSERT_TRUE(listener.Step());
  EXPECT_EQ(outbox_.Row("m1").status, OutboxStatus::kSent);
  EXPECT_EQ(outbox_.Row("m2").status, OutboxStatus::kSending);
  EXPECT_EQ(outbox_.Row("m3").status, OutboxStatus::kSent);
  EXPECT_EQ(queue_.acked, (std::set<uint64_t>{t1, t3}));
  EXPECT_EQ(queue_.rejected, (std::set<uint64_t>{t2}));
  EXPECT_TRUE(queue_.requeued.empty());
  EXPECT_EQ(listener.dead_lettered(), 1);
  EXPECT_NE(metrics_.Render().find("outbox_store_write_failures_total{write=\"record_acks\"} 0\n"),
            std::string::npos);
  // Nothing held: the next reply goes through at once.
  outbox_.Add(NewOutboxMessage({"m4", "order", "m4", "EVENTS", "OrderPlaced", "REPLIES", ""},
                               clock_.NowMillis(), RetryPolicy{}));
  queue_.Push(Reply("m4"));
  ASSERT_TRUE(listener.Step());
  EXPECT_EQ(outbox_.Row("m4").status, OutboxStatus::kSent);
}

// Recording one at a time, the store goes away: what is left is held (not
// dead-lettered) and recorded once it is back.
TEST_F(AckListenerTest, AnOutageWhileRepliesAreRecordedAloneHoldsTheRest) {
  RefusingOutbox refusing(outbox_);
  refusing.refuse["m2"] = absl::InternalError("CHECK constraint failed: outbox");
  refusing.refuse["m3"] = absl::UnavailableError("database is locked");
  AckListenerOptions options{"REPLIES", 256};
  options.clock = &clock_;
  AckListener listener(queue_, refusing, DecodeReply, metrics_, options);
  const uint64_t t1 = queue_.Push(Reply("m1"));
  const uint64_t t2 = queue_.Push(Reply("m2"));
  const uint64_t t3 = queue_.Push(Reply("m3"));
  ASSERT_TRUE(listener.Step());
  EXPECT_EQ(queue_.acked, (std::set<uint64_t>{t1}));
  EXPECT_EQ(queue_.rejected, (std::set<uint64_t>{t2}));
  EXPECT_EQ(outbox_.Row("m3").status, OutboxStatus::kSending);
  refusing.refuse.erase("m3");
  clock_.Advance(absl::Milliseconds(200));
  ASSERT_TRUE(listener.Step());
  EXPECT_EQ(outbox_.Row("m3").status, OutboxStatus::kSent);
  EXPECT_EQ(queue_.acked, (std::set<uint64_t>{t1, t3}));
  EXPECT_EQ(queue_.rejected, (std::set<uint64_t>{t2}));
  EXPECT_TRUE(queue_.requeued.empty());
  EXPECT_NE(metrics_.Render().find("outbox_store_write_failures_total{write=\"record_acks\"} 1\n"),
            std::string::npos);
}

// An exception from the decoder or the repository (an adopter's code) ends
// nothing: its reply is dead-lettered, the others are recorded.
TEST_F(AckListenerTest, AnExceptionFromTheDecoderOrTheRepositoryDeadLettersItsReply) {
  RefusingOutbox refusing(outbox_);
  refusing.throw_for.insert("m2");
  auto decode = [](const Delivery& reply) -> absl::StatusOr<std::vector<Acknowledgement>> {
    if (reply.body == "ack boom") throw std::runtime_error("the decoder broke");
    return DecodeReply(reply);
  };
  AckListener listener(queue_, refusing, decode, metrics_, {"REPLIES", 256});
  const uint64_t t1 = queue_.Push(Reply("m1"));
  const uint64_t boom = queue_.Push(Reply("boom"));
  const uint64_t t2 = queue_.Push(Reply("m2"));
  const uint64_t t3 = queue_.Push(Reply("m3"));
  ASSERT_TRUE(listener.Step());
  EXPECT_EQ(queue_.rejected, (std::set<uint64_t>{boom, t2}));
  EXPECT_EQ(queue_.acked, (std::set<uint64_t>{t1, t3}));
  EXPECT_EQ(outbox_.Row("m1").status, OutboxStatus::kSent);
  EXPECT_EQ(outbox_.Row("m3").status, OutboxStatus::kSent);
  EXPECT_EQ(listener.dead_lettered(), 2);
}

TEST_F(AckListenerTest, ALostConnectionIsReestablishedAndUnackedRepliesComeBack) {
  queue_.reachable = false;
  listener_.Step();
  EXPECT_EQ(queue_.connects, 0);
  queue_.reachable = true;
  queue_.Push(Reply("m3"));
  ASSERT_TRUE(listener_.Step());
  EXPECT_EQ(outbox_.Row("m3").status, OutboxStatus::kSent);
  EXPECT_EQ(queue_.connects, 1);
}

// Records each RecordAcks call's size, and how many replies were acked when
// it was made, then passes it on.
class CountingOutbox : public OutboxRepository {
 public:
  CountingOutbox(OutboxRepository& inner, const FakeConsumer& queue)
      : inner_(inner), queue_(queue) {}
  absl::StatusOr<AckTally> RecordAcks(const std::vector<std::string>& message_ids) override {
    calls.push_back({message_ids.size(), queue_.acked.size()});
    if (refuse && refuse(calls.size())) return absl::UnavailableError("database is locked");
    return inner_.RecordAcks(message_ids);
  }
  absl::StatusOr<int> RecordRejects(const std::vector<Rejection>& rejects) override {
    return inner_.RecordRejects(rejects);
  }
  absl::Status RecordPublishFailure(const std::vector<std::string>& ids,
                                    const std::string& error) override {
    return inner_.RecordPublishFailure(ids, error);
  }
  absl::StatusOr<std::vector<std::string>> TakenOver(const std::vector<std::string>& ids) override {
    return inner_.TakenOver(ids);
  }
  struct Call {
    size_t rows;
    size_t acked_before;
  };
  std::vector<Call> calls;
  // Given the call's number (1, 2, ...): true refuses it, as a locked file.
  std::function<bool(size_t)> refuse;

 private:
  OutboxRepository& inner_;
  const FakeConsumer& queue_;
};

// After an ack-path outage the reply queue holds full cumulative replies:
// 1,024 of 256 rows each are recorded in bounded chunks of whole replies,
// each chunk's replies acked before the next chunk is written.
TEST(AckListenerChunksTest, ABacklogOfFullRepliesIsRecordedInBoundedChunks) {
  constexpr int kReplies = 1024, kPerReply = 256, kMaxRows = 4096;
  ManualClock clock;
  FakeConsumer queue;
  InMemoryOutbox outbox{clock};
  CountingOutbox counting(outbox, queue);
  MetricsRegistry metrics;
  AckListenerOptions options{"REPLIES", kReplies};
  options.max_rows_per_commit = kMaxRows;
  AckListener listener(queue, counting, DecodeReply, metrics, options);
  for (int r = 0; r < kReplies; ++r) {
    std::string ids;
    for (int i = 0; i < kPerReply; ++i) {
      const std::string id = absl::StrCat("r", r, "-", i);
      if (r % 64 == 0) {  // some rows exist; the rest are another shard's
        outbox.Add(NewOutboxMessage({id, "order", id, "Q", "T", "R", ""}, clock.NowMillis(),
                                    RetryPolicy{}));
      }
      absl::StrAppend(&ids, i == 0 ? "" : ",", id);
    }
    Delivery d;
    d.message_id = absl::StrCat("reply-", r);
    d.body = "ack " + ids;
    queue.Push(d);
  }
  ASSERT_TRUE(listener.Step());
  ASSERT_EQ(counting.calls.size(), static_cast<size_t>(kReplies * kPerReply / kMaxRows));
  for (size_t i = 0; i < counting.calls.size(); ++i) {
    EXPECT_LE(counting.calls[i].rows, static_cast<size_t>(kMaxRows)) << "call " << i;
    EXPECT_EQ(counting.calls[i].acked_before, i * (kMaxRows / kPerReply)) << "call " << i;
  }
  EXPECT_EQ(queue.acked.size(), static_cast<size_t>(kReplies));
  EXPECT_EQ(listener.acknowledged(), (kReplies / 64) * kPerReply);
  EXPECT_EQ(outbox.Row("r64-7").status, OutboxStatus::kSent);
}

// One reply longer than the bound is split across transactions and acked
// only after its last part.
TEST(AckListenerChunksTest, OneReplyLongerThanTheBoundIsAckedAfterItsLastPart) {
  ManualClock clock;
  FakeConsumer queue;
  InMemoryOutbox outbox{clock};
  CountingOutbox counting(outbox, queue);
  MetricsRegistry metrics;
  AckListenerOptions options{"REPLIES", 16};
  options.max_rows_per_commit = 3;
  AckListener listener(queue, counting, DecodeReply, metrics, options);
  const uint64_t tag = queue.Push(Reply("a,b,c,d,e,f,g"));
  ASSERT_TRUE(listener.Step());
  ASSERT_EQ(counting.calls.size(), 3u);
  EXPECT_EQ(counting.calls[0].rows, 3u);
  EXPECT_EQ(counting.calls[2].rows, 1u);
  EXPECT_EQ(counting.calls[2].acked_before, 0u);
  EXPECT_EQ(queue.acked, (std::set<uint64_t>{tag}));
}

// Only what is not acked yet is held: a chunk recorded before the refusal
// stays acked, and a dead-lettered reply is not handled twice.
TEST(AckListenerChunksTest, AChunkRecordedBeforeTheStoreRefusedIsNotHeld) {
  ManualClock clock;
  FakeConsumer queue;
  InMemoryOutbox outbox{clock};
  for (const char* id : {"m1", "m2"}) {
    outbox.Add(
        NewOutboxMessage({id, "order", id, "Q", "T", "R", ""}, clock.NowMillis(), RetryPolicy{}));
  }
  CountingOutbox counting(outbox, queue);
  counting.refuse = [](size_t call) { return call == 2; };
  MetricsRegistry metrics;
  AckListenerOptions options{"REPLIES", 16};
  options.max_rows_per_commit = 1;
  options.clock = &clock;
  AckListener listener(queue, counting, DecodeReply, metrics, options);
  const uint64_t first = queue.Push(Reply("m1"));
  Delivery junk;
  junk.body = "junk";
  queue.Push(junk);
  queue.Push(Reply("m2"));
  ASSERT_TRUE(listener.Step());
  EXPECT_EQ(queue.acked, (std::set<uint64_t>{first}));
  EXPECT_EQ(queue.rejected.size(), 1u);
  EXPECT_EQ(outbox.Row("m2").status, OutboxStatus::kSending);
  clock.Advance(absl::Milliseconds(200));
  ASSERT_TRUE(listener.Step());
  EXPECT_EQ(outbox.Row("m2").status, OutboxStatus::kSent);
  EXPECT_EQ(queue.acked.size(), 2u);
  EXPECT_EQ(queue.rejected.size(), 1u);
  EXPECT_TRUE(queue.requeued.empty());
  EXPECT_EQ(listener.dead_lettered(), 1);
}

}  // namespace
}  // namespace outbox
