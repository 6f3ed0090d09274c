// Accounting's side of the consumer: PaymentCreated in, vouchers booked in
// a real accounting.db, replies as each publisher understands them, through
// the library's consumer role as accounting_service configures it. The
// consumer itself (windows, acks, requeues, dead letters) is the library's,
// tested in shared/outbox/internal/idempotent_consumer_test.cc.
#include "accounting_service/voucher_handler.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "absl/strings/str_cat.h"

#include "accounting_service/booking_for_tests.h"
#include "events/v1/events.pb.h"
#include "service_kit/failpoints.h"
#include "service_kit/topology.h"
#include "shared/testing/fakes.h"
#include "shared/testing/sequential_ids.h"
#include "shared/testing/status_matchers.h"
#include "shared/testing/temp_dir.h"

namespace outbox::accounting {
namespace {

using ::outbox::testing::FakeConsumer;
using ::outbox::testing::FakePublisher;
using ::outbox::testing::ManualClock;
using ::outbox::testing::SequentialIds;

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

std::unique_ptr<VoucherStore> OpenStore(const std::string& path, IdGenerator& ids,
                                        const Clock& clock) {
  auto store = VoucherStore::Open(path, DbOptions{}, ids, clock);
  EXPECT_OK(store);
  return store.ok() ? std::move(store).value() : nullptr;
}

// A consumer role over fakes with accounting's options; `queue` and
// `replies` point at its fake broker links.
struct Running {
  std::unique_ptr<Consumer> consumer;
  FakeConsumer* queue = nullptr;
  FakePublisher* replies = nullptr;
};

Running Start(VoucherHandler& handler, ManualClock& clock, MetricsRegistry& metrics) {
  auto queue = std::make_unique<FakeConsumer>();
  auto replies = std::make_unique<FakePublisher>();
  replies->clock = &clock;
  Running running{nullptr, queue.get(), replies.get()};
  auto consumer = AccountingConsumer(handler, clock, metrics, std::move(queue), std::move(replies));
  EXPECT_OK(consumer);
  if (consumer.ok()) running.consumer = std::move(consumer).value();
  return running;
}

class VoucherHandlerTest : public ::testing::Test {
 protected:
  // The vouchers booked: payment id -> voucher id.
  std::map<std::string, std::string> Vouchers() {
    std::map<std::string, std::string> booked;
    auto page = store_->List(0, 1000);
    EXPECT_OK(page);
    if (page.ok()) {
      for (const Voucher& v : page->items) booked[v.payment_id] = v.voucher_id;
    }
    return booked;
  }

  TempDir dir_{"voucher_handler_test"};
  ManualClock clock_;
  SequentialIds ids_{"v-"};
  std::unique_ptr<VoucherStore> store_ = OpenStore(dir_.path() + "/accounting.db", ids_, clock_);
  MetricsRegistry metrics_;
  VoucherHandler handler_{*store_, clock_, BookingRules{}};
  Running running_ = Start(handler_, clock_, metrics_);
  Consumer& consumer_ = *running_.consumer;
  FakeConsumer& queue_ = *running_.queue;
  FakePublisher& replies_ = *running_.replies;
};

TEST_F(VoucherHandlerTest, BooksABatchRepliesToEachReplyToThenAcks) {
  queue_.Push(Payment("m1", "p1"));
  queue_.Push(Payment("m2", "p2", "ACC_QUEUE.shard2"));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(Vouchers().size(), 2u);
  ASSERT_EQ(replies_.published.size(), 2u);
  EXPECT_EQ(replies_.published[0].topic, "ACC_QUEUE");
  EXPECT_EQ(replies_.published[1].topic, "ACC_QUEUE.shard2");
  EXPECT_EQ(replies_.published[0].type, "PaymentAccounted");
  EXPECT_EQ(queue_.acked.size(), 2u);
  EXPECT_EQ(consumer_.booked(), 2);
}

// The role counts in accounting's metric and stops at accounting's crash
// points (tests/e2e_crash_test.cc arms them by these names).
TEST_F(VoucherHandlerTest, TheRoleCountsVouchersAndCrashesAtAccountingsPoints) {
  queue_.Push(Payment("m1", "p1"));
  queue_.Push(Payment("m2", "p2"));
  ASSERT_TRUE(consumer_.Step());
  const std::string rendered = metrics_.Render();
  EXPECT_NE(rendered.find("# HELP outbox_vouchers_created_total vouchers booked"),
            std::string::npos);
  EXPECT_NE(rendered.find("outbox_vouchers_created_total 2"), std::string::npos);
  EXPECT_EQ(rendered.find("outbox_consumer_booked_total"), std::string::npos);
  EXPECT_EQ(consumer_.options().after_apply_failpoint, kFpAccountingAfterCommitBeforeReply);
  EXPECT_EQ(consumer_.options().before_ack_failpoint, kFpAccountingAfterReplyBeforeAck);
}

// payment_service declares the payment queues (with their arguments):
// accounting's consuming connection declares nothing, its reply connection
// ACC_QUEUE and the payment shards' reply queues, through the replies
// exchange.
TEST(ConsumerOptionsOfTest, DeclaresOnlyWhatAccountingWrites) {
  AccountingServiceOptions options = TestServiceOptions();
  options.service.accounting_shards = 3;
  options.service.queue_type = "quorum";
  options.shard = 2;
  options.reply_queues = {"ACC_QUEUE", "ACC_QUEUE-1"};
  options.prefetch = 64;
  options.consume_linger_ms = 20;
  options.processed_retention = absl::Hours(48);
  MetricsRegistry metrics;
  const Consumer::Options consumer = ConsumerOptionsOf(options, metrics);
  EXPECT_EQ(consumer.queue, "PAY_QUEUE-2");
  EXPECT_EQ(consumer.reply_queue, "ACC_QUEUE");
  ASSERT_TRUE(consumer.topology.has_value());
  EXPECT_TRUE(consumer.topology->queues.empty());
  EXPECT_TRUE(consumer.topology->exchange.empty());
  ASSERT_TRUE(consumer.reply_topology.has_value());
  EXPECT_EQ(consumer.reply_topology->queues,
            (std::vector<std::string>{"ACC_QUEUE", "ACC_QUEUE-1"}));
  EXPECT_EQ(consumer.reply_topology->exchange, kRepliesExchange);
  EXPECT_EQ(consumer.reply_topology->queue_type, "quorum");
  EXPECT_EQ(consumer.prefetch, 64);
  EXPECT_EQ(consumer.linger, absl::Milliseconds(20));
  EXPECT_EQ(consumer.inbox_retention, absl::Hours(48));
  EXPECT_EQ(consumer.metrics, &metrics);
  EXPECT_EQ(consumer.signing.Describe(), "unsigned");
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

TEST_F(VoucherHandlerTest, OneBatchReplyPerReplyQueueListsEveryMessageNewAndDuplicate) {
  queue_.Push(BatchingPayment("m0-first", "p0"));  // booked before: a duplicate now
  ASSERT_TRUE(consumer_.Step());
  replies_.published.clear();
  queue_.acked.clear();
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
  EXPECT_EQ(acc.accounted(1).voucher_id(), Vouchers()["p0"]);
  EXPECT_EQ(acc.accounted(2).message_id(), "m3");
  EXPECT_EQ(replies_.published[1].topic, "ACC_QUEUE.shard2");
  EXPECT_EQ(BatchReply(replies_.published[1]).accounted(0).message_id(), "m2");
  EXPECT_EQ(queue_.acked.size(), 4u);
  EXPECT_EQ(consumer_.booked(), 4);  // p0's first message and three here
  EXPECT_EQ(consumer_.duplicates(), 1);
}

// A rolling upgrade: events of an older payment_service (no
// batch_replies_accepted) get replies of their own in the same batch.
TEST_F(VoucherHandlerTest, AnOlderPublishersMessagesGetAReplyEachBesideABatchReply) {
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

// Over the limit: a publisher that understands rejects gets one, inside
// its batch reply, and nothing is booked; an older publisher's message is
// dead-lettered, as before rejects existed.
TEST_F(VoucherHandlerTest, WhatIsNeverBookedIsRejectedOrForOlderPublishersDeadLettered) {
  const int64_t over = kDefaultMaxAmountMinor + 1;
  queue_.Push(Payment("m1", "p1", "ACC_QUEUE", true, 100, true));
  queue_.Push(Payment("m2", "p2", "ACC_QUEUE", true, over, true));
  const uint64_t old = queue_.Push(Payment("old", "q1", "ACC_QUEUE", false, over, false));
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(Vouchers().size(), 1u);
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
TEST_F(VoucherHandlerTest, APaymentBookedBeforeIsAnsweredAsBookedUnderTighterRules) {
  queue_.Push(Payment("m1", "p1", "ACC_QUEUE", true, 100, true));
  queue_.Push(Payment("old", "q1", "ACC_QUEUE", false, 100, false));
  ASSERT_TRUE(consumer_.Step());
  const std::map<std::string, std::string> booked = Vouchers();
  ASSERT_EQ(booked.size(), 2u);

  BookingRules tighter;
  tighter.max_amount_minor = 50;
  VoucherHandler tighter_handler(*store_, clock_, tighter);
  MetricsRegistry metrics;
  Running running = Start(tighter_handler, clock_, metrics);
  ASSERT_NE(running.consumer, nullptr);
  Consumer& restarted = *running.consumer;
  FakeConsumer& redelivered = *running.queue;
  FakePublisher& replies = *running.replies;
  redelivered.Push(Payment("m1", "p1", "ACC_QUEUE", true, 100, true));
  redelivered.Push(Payment("old", "q1", "ACC_QUEUE", false, 100, false));
  redelivered.Push(Payment("m2", "p2", "ACC_QUEUE", true, 100, true));
  const uint64_t old_new = redelivered.Push(Payment("old2", "q2", "ACC_QUEUE", false, 100, false));
  ASSERT_TRUE(restarted.Step());

  EXPECT_EQ(Vouchers(), booked);
  EXPECT_EQ(redelivered.rejected, (std::set<uint64_t>{old_new}));
  ASSERT_EQ(replies.published.size(), 2u);
  const events::v1::PaymentsAccounted batch = BatchReply(replies.published[0]);
  ASSERT_EQ(batch.accounted_size(), 2);
  EXPECT_EQ(batch.accounted(0).message_id(), "m1");
  EXPECT_TRUE(batch.accounted(0).duplicate());
  EXPECT_EQ(batch.accounted(0).voucher_id(), booked.at("p1"));
  EXPECT_EQ(batch.accounted(0).rejected_reason(), "");
  EXPECT_EQ(batch.accounted(1).message_id(), "m2");
  EXPECT_EQ(batch.accounted(1).voucher_id(), "");
  EXPECT_NE(batch.accounted(1).rejected_reason(), "");
  events::v1::PaymentAccounted one;
  ASSERT_TRUE(one.ParseFromString(replies.published[1].body));
  EXPECT_EQ(one.message_id(), "old");
  EXPECT_TRUE(one.duplicate());
  EXPECT_EQ(one.voucher_id(), booked.at("q1"));
  EXPECT_EQ(restarted.duplicates(), 2);
  EXPECT_EQ(redelivered.acked.size(), 3u);
}

TEST_F(VoucherHandlerTest, ADuplicateBooksNothingButIsRepliedToAgain) {
  queue_.Push(Payment("m1", "p1"));
  queue_.Push(Payment("m1", "p1"));        // redelivery of the same message
  queue_.Push(Payment("m1-again", "p1"));  // a re-publish with another id
  ASSERT_TRUE(consumer_.Step());
  EXPECT_EQ(Vouchers().size(), 1u);
  EXPECT_EQ(replies_.published.size(), 3u);
  EXPECT_EQ(consumer_.booked(), 1);
  EXPECT_EQ(consumer_.duplicates(), 2);
  events::v1::PaymentAccounted reply;
  ASSERT_TRUE(reply.ParseFromString(replies_.published[1].body));
  EXPECT_TRUE(reply.duplicate());
  EXPECT_EQ(reply.voucher_id(), Vouchers()["p1"]);
}

// A message booked, its id pruned after the retention, the same message
// delivered again: vouchers are kept for good, so it is found by its
// payment, books nothing, and is answered as a duplicate.
TEST_F(VoucherHandlerTest, APrunedMessageDeliveredAgainBooksNothingAndIsAnsweredAsADuplicate) {
  Delivery d = Payment("m1", "p1");
  queue_.Push(d);
  ASSERT_TRUE(consumer_.Step());
  ASSERT_EQ(replies_.published.size(), 1u);
  events::v1::PaymentAccounted booked;
  ASSERT_TRUE(booked.ParseFromString(replies_.published[0].body));
  EXPECT_FALSE(booked.duplicate());

  clock_.Advance(absl::Hours(721));
  auto pruned = consumer_.PruneStep();  // the role's pruner, PROCESSED_RETENTION's 30 days
  ASSERT_OK(pruned);
  EXPECT_EQ(*pruned, 1);

  d.redelivered = true;
  queue_.Push(d);
  ASSERT_TRUE(consumer_.Step());
  ASSERT_EQ(replies_.published.size(), 2u);
  events::v1::PaymentAccounted again;
  ASSERT_TRUE(again.ParseFromString(replies_.published[1].body));
  EXPECT_TRUE(again.duplicate());
  EXPECT_EQ(again.voucher_id(), booked.voucher_id());
  EXPECT_EQ(consumer_.booked(), 1);
  EXPECT_EQ(consumer_.duplicates(), 1);
  EXPECT_EQ(Vouchers().size(), 1u);
  EXPECT_EQ(queue_.acked.size(), 2u);
}

}  // namespace
}  // namespace outbox::accounting
