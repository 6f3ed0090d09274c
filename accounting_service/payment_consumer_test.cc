#include "accounting_service/payment_consumer.h"

#include <gtest/gtest.h>

#include <map>

#include "absl/strings/str_cat.h"

#include "events/v1/events.pb.h"
#include "shared/testing/fakes.h"
#include "shared/testing/status_matchers.h"

namespace outbox::accounting {
namespace {

using ::outbox::testing::FakeConsumer;
using ::outbox::testing::FakePublisher;
using ::outbox::testing::ManualClock;
using ::outbox::testing::SignedBy;

// The voucher book in memory: the same dedup rules, by message id first,
// then by payment id.
class InMemoryLedger final : public VoucherLedger {
 public:
  absl::Status fail_with;
  std::map<std::string, std::string> voucher_by_payment;
  std::map<std::string, std::string> voucher_by_message;

  absl::StatusOr<std::vector<ApplyOutcome>> ApplyBatch(
      const std::vector<PaymentEvent>& events) override {
    if (!fail_with.ok()) return fail_with;
    std::vector<ApplyOutcome> out;
    for (const PaymentEvent& e : events) {
      ApplyOutcome o;
      if (auto m = voucher_by_message.find(e.message_id); m != voucher_by_message.end()) {
        out.push_back({m->second, true});
        continue;
      }
      auto p = voucher_by_payment.find(e.payment_id);
      o.duplicate = p != voucher_by_payment.end();
      o.voucher_id = o.duplicate ? p->second : "v-" + e.payment_id;
      voucher_by_payment[e.payment_id] = o.voucher_id;
      voucher_by_message[e.message_id] = o.voucher_id;
      out.push_back(o);
    }
    return out;
  }
  absl::StatusOr<std::vector<std::optional<std::string>>> Booked(
      const std::vector<PaymentEvent>& events) override {
    if (!fail_with.ok()) return fail_with;
    std::vector<std::optional<std::string>> out;
    for (const PaymentEvent& e : events) {
      if (auto m = voucher_by_message.find(e.message_id); m != voucher_by_message.end()) {
        out.push_back(m->second);
      } else if (auto p = voucher_by_payment.find(e.payment_id); p != voucher_by_payment.end()) {
        out.push_back(p->second);
      } else {
        out.push_back(std::nullopt);
      }
    }
    return out;
  }
};

// A PaymentCreated as a publisher that does not accept batch replies sends
// it (every payment_service before batch replies).
Delivery Payment(const std::string& message_id, const std::string& payment_id,
                 const std::string& reply_to = "ACC_QUEUE", bool batch_replies_accepted = false,
                 int64_t amount_minor = 100, bool rejects_accepted = false) {
  events::v1::PaymentCreated e;
  e.set_message_id(message_id);
  e.set_payment_id(payment_id);
  e.set_payer_account("alice");
  e.set_payee_account("bob");
  e.set_amount_minor(amount_minor);
  e.set_currency("EUR");
  e.set_batch_replies_accepted(batch_replies_accepted);
  e.set_rejects_accepted(rejects_accepted);
  Delivery d;
  d.message_id = message_id;
  d.reply_to = reply_to;
  d.body = e.SerializeAsString();
  return d;
}

class PaymentConsumerTest : public ::testing::Test {
 protected:
  PaymentConsumerTest() { replies_.clock = &clock_; }

  ManualClock clock_;
  FakeConsumer queue_;
  FakePublisher replies_;
  InMemoryLedger ledger_;
  MetricsRegistry metrics_;
  PaymentConsumer consumer_{queue_, replies_, ledger_, clock_, metrics_, ConsumerOptions{}};
};

TEST_F(PaymentConsumerTest, BooksABatchRepliesToEachReplyToThenAcks) {
  queue_.Push(Payment("m1", "p1"));
  queue_.Push(Payment("m2", "p2", "ACC_QUEUE.shard2"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(ledger_.voucher_by_payment.size(), 2u);
  ASSERT_EQ(replies_.published.size(), 2u);
  EXPECT_EQ(replies_.published[0].topic, "ACC_QUEUE");
  EXPECT_EQ(replies_.published[1].topic, "ACC_QUEUE.shard2");
  EXPECT_EQ(replies_.published[0].type, "PaymentAccounted");
  EXPECT_EQ(queue_.acked.size(), 2u);
  EXPECT_EQ(consumer_.applied(), 2);
}

// A publisher that accepts batch replies.
Delivery BatchingPayment(const std::string& message_id, const std::string& payment_id,
                         const std::string& reply_to = "ACC_QUEUE") {
  return Payment(message_id, payment_id, reply_to, /*batch_replies_accepted=*/true);
}

events::v1::PaymentsAccounted BatchReply(const OutgoingMessage& m) {
  events::v1::PaymentsAccounted batch;
  EXPECT_EQ(m.type, "PaymentsAccounted");
  EXPECT_TRUE(batch.ParseFromString(m.body));
  return batch;
}

TEST_F(PaymentConsumerTest, OneBatchReplyPerReplyQueueListsEveryMessageNewAndDuplicate) {
  ledger_.voucher_by_payment["p0"] = "v-p0";  // booked before: a duplicate now
  Delivery traced = BatchingPayment("m1", "p1");
  traced.traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
  queue_.Push(traced);
  queue_.Push(BatchingPayment("m2", "p2", "ACC_QUEUE.shard2"));
  queue_.Push(BatchingPayment("m0", "p0"));
  queue_.Push(BatchingPayment("m3", "p3"));
  ASSERT_TRUE(consumer_.Step());
  ASSERT_EQ(replies_.published.size(), 2u);
  EXPECT_EQ(replies_.published[0].topic, "ACC_QUEUE");
  EXPECT_EQ(replies_.published[0].message_id, "m1+3");
  const events::v1::PaymentsAccounted acc = BatchReply(replies_.published[0]);
  ASSERT_EQ(acc.accounted_size(), 3);
  EXPECT_EQ(acc.accounted(0).message_id(), "m1");
  // Each entry continues its own message's trace.
  EXPECT_EQ(acc.accounted(0).traceparent().substr(0, 36), "00-0af7651916cd43dd8448eb211c80319c-");
  EXPECT_EQ(acc.accounted(1).message_id(), "m0");
  EXPECT_EQ(acc.accounted(1).traceparent(), "");
  EXPECT_TRUE(acc.accounted(1).duplicate());
  EXPECT_EQ(acc.accounted(1).voucher_id(), "v-p0");
  EXPECT_EQ(acc.accounted(2).message_id(), "m3");
  EXPECT_EQ(replies_.published[1].topic, "ACC_QUEUE.shard2");
  EXPECT_EQ(BatchReply(replies_.published[1]).accounted(0).message_id(), "m2");
  EXPECT_EQ(queue_.acked.size(), 4u);
  EXPECT_EQ(consumer_.applied(), 3);
  EXPECT_EQ(consumer_.duplicates(), 1);
}

// A rolling upgrade: events of an older payment_service (no
// batch_replies_accepted) get replies of their own in the same batch.
TEST_F(PaymentConsumerTest, AnOlderPublishersMessagesGetAReplyEachBesideABatchReply) {
  queue_.Push(BatchingPayment("m1", "p1"));
  queue_.Push(Payment("old1", "q1"));
  queue_.Push(BatchingPayment("m2", "p2"));
  queue_.Push(Payment("old2", "q2"));
  ASSERT_TRUE(consumer_.Step());
  ASSERT_EQ(replies_.published.size(), 3u);
  EXPECT_EQ(BatchReply(replies_.published[0]).accounted_size(), 2);
  for (size_t i : {1u, 2u}) {
    EXPECT_EQ(replies_.published[i].type, "PaymentAccounted");
    events::v1::PaymentAccounted one;
    ASSERT_TRUE(one.ParseFromString(replies_.published[i].body));
    EXPECT_EQ(one.message_id(), i == 1 ? "old1" : "old2");
  }
  EXPECT_EQ(queue_.acked.size(), 4u);
}

TEST_F(PaymentConsumerTest, ABatchReplyNotConfirmedSendsBackEveryDeliveryItAnswers) {
  replies_.answer = [](const OutgoingMessage& m) {
    return m.type == "PaymentsAccounted" ? FakePublisher::Answer::kNack
                                         : FakePublisher::Answer::kAck;
  };
  const uint64_t t1 = queue_.Push(BatchingPayment("m1", "p1"));
  const uint64_t old = queue_.Push(Payment("old1", "q1"));
  const uint64_t t2 = queue_.Push(BatchingPayment("m2", "p2"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(queue_.acked, (std::set<uint64_t>{old}));
  EXPECT_EQ(queue_.requeued, (std::set<uint64_t>{t1, t2}));
  EXPECT_EQ(consumer_.requeued(), 2);
  // Redelivered: both duplicates, answered again in one reply.
  replies_.answer = [](const OutgoingMessage&) { return FakePublisher::Answer::kAck; };
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(consumer_.duplicates(), 2);
  EXPECT_EQ(BatchReply(replies_.published.back()).accounted_size(), 2);
  EXPECT_EQ(queue_.ready(), 0u);
}

// Over the limit: a publisher that understands rejects gets one, inside
// its batch reply, and nothing is booked; an older publisher's message is
// dead-lettered, as before rejects existed.
TEST_F(PaymentConsumerTest, WhatIsNeverBookedIsRejectedOrForOlderPublishersDeadLettered) {
  const int64_t over = kDefaultMaxAmountMinor + 1;
  queue_.Push(Payment("m1", "p1", "ACC_QUEUE", true, 100, true));
  queue_.Push(Payment("m2", "p2", "ACC_QUEUE", true, over, true));
  const uint64_t old = queue_.Push(Payment("old", "q1", "ACC_QUEUE", false, over, false));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(ledger_.voucher_by_payment.size(), 1u);
  EXPECT_EQ(queue_.rejected, (std::set<uint64_t>{old}));
  ASSERT_EQ(replies_.published.size(), 1u);
  events::v1::PaymentsAccounted batch = BatchReply(replies_.published[0]);
  ASSERT_EQ(batch.accounted_size(), 2);
  EXPECT_EQ(batch.accounted(0).rejected_reason(), "");
  EXPECT_NE(batch.accounted(0).voucher_id(), "");
  EXPECT_EQ(batch.accounted(1).message_id(), "m2");
  EXPECT_EQ(batch.accounted(1).voucher_id(), "");
  EXPECT_EQ(batch.accounted(1).rejected_reason(),
            absl::StrCat("amount_minor ", over, " is over accounting's limit of ",
                         kDefaultMaxAmountMinor));
  EXPECT_NE(metrics_.Render().find("outbox_consumer_rejected_total 1"), std::string::npos);
}

// Booked, then accounting restarts with tighter rules before the reply was
// confirmed: the redelivered copies are answered as booked, with their
// voucher, whatever today's rules say (a reject would tell the publisher
// the payment was never booked). Nothing is booked twice, nothing is
// dead-lettered; a new payment is still judged by today's rules.
TEST_F(PaymentConsumerTest, APaymentBookedBeforeIsAnsweredAsBookedUnderTighterRules) {
  queue_.Push(Payment("m1", "p1", "ACC_QUEUE", true, 100, true));
  queue_.Push(Payment("old", "q1", "ACC_QUEUE", false, 100, false));
  ASSERT_TRUE(consumer_.Step());
  ASSERT_EQ(ledger_.voucher_by_payment.size(), 2u);

  ConsumerOptions tighter;
  tighter.rules.max_amount_minor = 50;
  FakeConsumer redelivered;
  FakePublisher replies;
  replies.clock = &clock_;
  MetricsRegistry metrics;
  PaymentConsumer restarted(redelivered, replies, ledger_, clock_, metrics, tighter);
  redelivered.Push(Payment("m1", "p1", "ACC_QUEUE", true, 100, true));
  redelivered.Push(Payment("old", "q1", "ACC_QUEUE", false, 100, false));
  redelivered.Push(Payment("m2", "p2", "ACC_QUEUE", true, 100, true));
  const uint64_t old_new = redelivered.Push(Payment("old2", "q2", "ACC_QUEUE", false, 100, false));
  ASSERT_TRUE(restarted.Step());

  EXPECT_EQ(ledger_.voucher_by_payment.size(), 2u);
  EXPECT_EQ(redelivered.rejected, (std::set<uint64_t>{old_new}));
  ASSERT_EQ(replies.published.size(), 2u);
  const events::v1::PaymentsAccounted batch = BatchReply(replies.published[0]);
  ASSERT_EQ(batch.accounted_size(), 2);
  EXPECT_EQ(batch.accounted(0).message_id(), "m1");
  EXPECT_TRUE(batch.accounted(0).duplicate());
  EXPECT_EQ(batch.accounted(0).voucher_id(), "v-p1");
  EXPECT_EQ(batch.accounted(0).rejected_reason(), "");
  EXPECT_EQ(batch.accounted(1).message_id(), "m2");
  EXPECT_EQ(batch.accounted(1).voucher_id(), "");
  EXPECT_NE(batch.accounted(1).rejected_reason(), "");
  events::v1::PaymentAccounted one;
  ASSERT_TRUE(one.ParseFromString(replies.published[1].body));
  EXPECT_EQ(one.message_id(), "old");
  EXPECT_TRUE(one.duplicate());
  EXPECT_EQ(one.voucher_id(), "v-q1");
  EXPECT_EQ(restarted.duplicates(), 2);
  EXPECT_EQ(redelivered.acked.size(), 3u);
}

TEST_F(PaymentConsumerTest, ADuplicateBooksNothingButIsRepliedToAgain) {
  queue_.Push(Payment("m1", "p1"));
  queue_.Push(Payment("m1", "p1"));        // redelivery of the same message
  queue_.Push(Payment("m1-again", "p1"));  // a re-publish with another id
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(ledger_.voucher_by_payment.size(), 1u);
  EXPECT_EQ(replies_.published.size(), 3u);
  EXPECT_EQ(consumer_.applied(), 1);
  EXPECT_EQ(consumer_.duplicates(), 2);
  events::v1::PaymentAccounted reply;
  ASSERT_TRUE(reply.ParseFromString(replies_.published[1].body));
  EXPECT_TRUE(reply.duplicate());
  EXPECT_EQ(reply.voucher_id(), "v-p1");
}

TEST_F(PaymentConsumerTest, PoisonIsDeadLetteredOnceAndNeverRequeued) {
  Delivery junk;
  junk.message_id = "junk";
  junk.body = "\xff\xff";
  const uint64_t bad = queue_.Push(junk);
  queue_.Push(Payment("m1", "p1"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(queue_.rejected, (std::set<uint64_t>{bad}));
  EXPECT_TRUE(queue_.requeued.empty());
  EXPECT_EQ(consumer_.dead_lettered(), 1);
  EXPECT_NE(metrics_.Render().find("outbox_dead_lettered_total{queue=\"PAY_QUEUE\"} 1"),
            std::string::npos);
  EXPECT_EQ(ledger_.voucher_by_payment.size(), 1u);
}

// With a linger, a small batch waits for what arrives meanwhile: one
// transaction and one cumulative reply for both.
TEST_F(PaymentConsumerTest, ASmallBatchLingersForWhatArrivesMeanwhile) {
  ConsumerOptions options;
  options.linger = absl::Seconds(30);  // ended by the full batch or an empty wait, not by time
  options.prefetch = 2;
  PaymentConsumer consumer(queue_, replies_, ledger_, clock_, metrics_, options);
  queue_.Push(BatchingPayment("m1", "p1"));
  queue_.on_next = [&](int n) {
    if (n == 2) queue_.Push(BatchingPayment("m2", "p2"));
  };
  ASSERT_TRUE(consumer.Step());
  EXPECT_EQ(queue_.nexts, 2);  // the second take filled the batch (prefetch 2)
  EXPECT_EQ(ledger_.voucher_by_payment.size(), 2u);
  ASSERT_EQ(replies_.published.size(), 1u);
  EXPECT_EQ(replies_.published[0].message_id, "m1+2");
  EXPECT_EQ(queue_.acked.size(), 2u);
  EXPECT_EQ(consumer.lingers(), 1);
}

// Once it holds linger_batch, it stops waiting and takes what else is
// already there, up to the prefetch.
TEST_F(PaymentConsumerTest, ALingerEndsAtItsBatchSizeWithWhatElseIsWaiting) {
  ConsumerOptions options;
  options.linger = absl::Seconds(30);
  options.linger_batch = 4;
  PaymentConsumer consumer(queue_, replies_, ledger_, clock_, metrics_, options);
  queue_.Push(BatchingPayment("m1", "p1"));
  queue_.on_next = [&](int n) {
    if (n != 2) return;
    for (int i = 2; i <= 6; ++i) {
      queue_.Push(BatchingPayment(absl::StrCat("m", i), absl::StrCat("p", i)));
    }
  };
  ASSERT_TRUE(consumer.Step());
  EXPECT_EQ(queue_.nexts, 3);  // the first, the linger's (to 4), the rest (5 and 6)
  EXPECT_EQ(ledger_.voucher_by_payment.size(), 6u);
  ASSERT_EQ(replies_.published.size(), 1u);
  EXPECT_EQ(replies_.published[0].message_id, "m1+6");
}

// Without one (the default), the batch is what was waiting; and a batch
// that starts with linger_batch (4) or more is taken at once even with a linger.
TEST_F(PaymentConsumerTest, NoLingerOrABigBatchIsTakenAtOnce) {
  queue_.Push(BatchingPayment("m1", "p1"));
  queue_.on_next = [&](int n) {
    if (n == 2) queue_.Push(BatchingPayment("m2", "p2"));
  };
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(queue_.nexts, 1);
  EXPECT_EQ(ledger_.voucher_by_payment.size(), 1u);
  EXPECT_EQ(consumer_.lingers(), 0);

  ConsumerOptions options;
  options.linger = absl::Seconds(30);
  PaymentConsumer lingering(queue_, replies_, ledger_, clock_, metrics_, options);
  for (int i = 0; i < 4; ++i) {
    queue_.Push(BatchingPayment(absl::StrCat("b", i), absl::StrCat("pb", i)));
  }
  queue_.nexts = 0;
  queue_.on_next = nullptr;
  ASSERT_TRUE(lingering.Step());
  EXPECT_EQ(queue_.nexts, 1);
  EXPECT_EQ(ledger_.voucher_by_payment.size(), 5u);  // p1 and the 4
  EXPECT_EQ(lingering.lingers(), 0);
}

TEST_F(PaymentConsumerTest, WithKeysAForgedOrUnsignedEventBooksNothingAndIsDeadLettered) {
  auto keys = MessageKeys::Parse("k1 0123456789abcdef0123456789abcdef");
  ASSERT_OK(keys);
  auto forger = MessageKeys::Parse("k1 not-the-secret-not-the-secret-not-the");
  ASSERT_OK(forger);
  ConsumerOptions options;
  options.keys = &*keys;
  PaymentConsumer consumer(queue_, replies_, ledger_, clock_, metrics_, options);
  const uint64_t unsigned_tag = queue_.Push(Payment("m1", "p1"));
  const uint64_t forged_tag = queue_.Push(SignedBy(*forger, Payment("m2", "p2")));
  Delivery redirected = SignedBy(*keys, Payment("m3", "p3"));
  redirected.reply_to = "ACC_QUEUE.attacker";  // signed for ACC_QUEUE, sent elsewhere
  const uint64_t redirected_tag = queue_.Push(redirected);
  const uint64_t good = queue_.Push(SignedBy(*keys, Payment("m4", "p4")));
  ASSERT_TRUE(consumer.Step());
  EXPECT_EQ(ledger_.voucher_by_payment.size(), 1u);
  EXPECT_EQ(ledger_.voucher_by_payment.count("p4"), 1u);
  EXPECT_EQ(queue_.rejected, (std::set<uint64_t>{unsigned_tag, forged_tag, redirected_tag}));
  EXPECT_EQ(queue_.acked, (std::set<uint64_t>{good}));
  EXPECT_EQ(consumer.unauthenticated(), 3);
  EXPECT_EQ(consumer.dead_lettered(), 3);
  ASSERT_EQ(replies_.published.size(), 1u);  // only the signed event is replied to
}

TEST_F(PaymentConsumerTest, AReplyToThatIsNoQueueIsDeadLetteredBeforeAnythingIsBooked) {
  replies_.missing = {"nowhere"};
  const uint64_t bad = queue_.Push(Payment("m1", "p1", "nowhere"));
  const uint64_t fine = queue_.Push(Payment("m2", "p2"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(queue_.rejected, (std::set<uint64_t>{bad}));
  EXPECT_EQ(queue_.acked, (std::set<uint64_t>{fine}));
  EXPECT_EQ(ledger_.voucher_by_payment.count("p1"), 0u);  // nothing booked for it
  EXPECT_EQ(ledger_.voucher_by_payment.count("p2"), 1u);
  EXPECT_EQ(consumer_.dead_lettered(), 1);
  // Known queues are checked once, not per message.
  const int inspections = replies_.inspections;
  queue_.Push(Payment("m3", "p3"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(replies_.inspections, inspections);
}

TEST_F(PaymentConsumerTest, AnUnroutableReplyToIsPoisonToo) {
  replies_.answer = [](const OutgoingMessage& m) {
    return m.topic == "nowhere" ? FakePublisher::Answer::kReturn : FakePublisher::Answer::kAck;
  };
  const uint64_t lost = queue_.Push(Payment("m1", "p1", "nowhere"));
  const uint64_t fine = queue_.Push(Payment("m2", "p2"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(queue_.rejected, (std::set<uint64_t>{lost}));
  EXPECT_EQ(queue_.acked, (std::set<uint64_t>{fine}));
  EXPECT_EQ(consumer_.dead_lettered(), 1);
}

TEST_F(PaymentConsumerTest, AReplyNotConfirmedSendsItsDeliveryBackOnly) {
  replies_.answer = [](const OutgoingMessage& m) {
    return m.message_id == "m1" ? FakePublisher::Answer::kNack : FakePublisher::Answer::kAck;
  };
  const uint64_t t1 = queue_.Push(Payment("m1", "p1"));
  const uint64_t t2 = queue_.Push(Payment("m2", "p2"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(queue_.acked, (std::set<uint64_t>{t2}));
  EXPECT_EQ(queue_.requeued, (std::set<uint64_t>{t1}));
  // The reply connection is replaced: a nacking channel may stay stuck.
  EXPECT_FALSE(replies_.connected());
  EXPECT_EQ(replies_.drops(), 1);
  // Redelivered: found to be a duplicate and replied to again.
  replies_.answer = [](const OutgoingMessage&) { return FakePublisher::Answer::kAck; };
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(consumer_.duplicates(), 1);
  EXPECT_EQ(queue_.ready(), 0u);
}

TEST_F(PaymentConsumerTest, TheNextBatchIsBookedWhileTheLastOnesRepliesAwaitTheirConfirms) {
  replies_.hold_confirms = true;
  const uint64_t t1 = queue_.Push(Payment("m1", "p1"));
  ASSERT_TRUE(consumer_.Step());  // booked and replied to; not acked before the confirm
  EXPECT_EQ(consumer_.applied(), 1);
  EXPECT_TRUE(queue_.acked.empty());
  const uint64_t t2 = queue_.Push(Payment("m2", "p2"));
  ASSERT_TRUE(consumer_.Step());  // the next batch does not wait for it
  EXPECT_EQ(consumer_.applied(), 2);
  EXPECT_EQ(replies_.published.size(), 2u);
  EXPECT_TRUE(queue_.acked.empty());
  replies_.hold_confirms = false;
  ASSERT_TRUE(consumer_.Step());  // both confirms: both acked
  EXPECT_EQ(queue_.acked, (std::set<uint64_t>{t1, t2}));
  EXPECT_TRUE(queue_.requeued.empty());
}

TEST_F(PaymentConsumerTest, RepliesNeverConfirmedSendTheirDeliveriesBack) {
  replies_.hold_confirms = true;
  const uint64_t t1 = queue_.Push(Payment("m1", "p1"));
  ASSERT_TRUE(consumer_.Step());
  // No confirm within the timeout: the channel is stuck; replaced, and the
  // delivery goes back to be replied to again.
  for (int i = 0; i < 1000 && queue_.requeued.empty(); ++i) ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(queue_.requeued, (std::set<uint64_t>{t1}));
  EXPECT_TRUE(queue_.acked.empty());
  EXPECT_EQ(replies_.drops(), 1);
}

TEST_F(PaymentConsumerTest, WhenBookingFailsTheBatchGoesBackAndNothingIsReplied) {
  ledger_.fail_with = absl::UnavailableError("disk I/O error");
  queue_.Push(Payment("m1", "p1"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_TRUE(replies_.published.empty());
  EXPECT_EQ(queue_.requeued.size(), 1u);
  EXPECT_EQ(consumer_.requeued(), 1);
}

TEST_F(PaymentConsumerTest, NoDeliveriesAreTakenWhileRepliesCannotBeSent) {
  replies_.reachable = false;
  queue_.Push(Payment("m1", "p1"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(queue_.ready(), 1u);
  EXPECT_EQ(queue_.connects, 0);
}

TEST_F(PaymentConsumerTest, ALostReplyConnectionRequeuesAndReconnects) {
  queue_.Push(Payment("m1", "p1"));
  ASSERT_OK(replies_.Connect());
  replies_.Drop();
  ASSERT_TRUE(consumer_.Step());  // booked, but the replies could not be published
  EXPECT_EQ(queue_.requeued.size(), 1u);
  ASSERT_TRUE(consumer_.Step());  // reconnected: the redelivery is a duplicate, replied
  EXPECT_EQ(replies_.published.size(), 1u);
  EXPECT_EQ(consumer_.duplicates(), 1);
  EXPECT_EQ(replies_.connects, 2);
}

}  // namespace
}  // namespace outbox::accounting
