// Today's payment side against the queue messages of earlier builds
// (tests/fixtures/messages/README.md): accounting's replies as those builds
// sent them close their outbox rows, and today's codec still writes the
// PaymentCreated bodies every earlier build wrote.
#include <gtest/gtest.h>

#include "events/v1/events.pb.h"
#include "payment_service/payment_codec.h"
#include "shared/outbox/internal/ack_listener.h"
#include "shared/outbox/internal/state_machine.h"
#include "shared/testing/fakes.h"
#include "shared/testing/message_fixtures.h"
#include "shared/testing/status_matchers.h"

namespace outbox::payment {
namespace {

using ::outbox::testing::FakeConsumer;
using ::outbox::testing::InMemoryOutbox;
using ::outbox::testing::ManualClock;
using ::outbox::testing::ReadFixtureKeys;
using ::outbox::testing::ReadMessageFixture;

const std::string kFixtures = std::string(OUTBOX_SOURCE_DIR) + "/tests/fixtures/messages";

class PaymentAccountedFixturesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto keys = ReadFixtureKeys(kFixtures);
    ASSERT_OK(keys);
    keys_ = std::make_unique<MessageKeys>(std::move(keys).value());
  }

  Delivery Fixture(const std::string& name) {
    auto d = ReadMessageFixture(kFixtures, name);
    EXPECT_OK(d);
    return d.ok() ? *d : Delivery{};
  }

  // The outbox row the reply acknowledges, SENDING; then one listener turn
  // over the reply with `keys` (null: unsigned allowed). Returns its tag.
  uint64_t Receive(const Delivery& d, const MessageKeys* keys) {
    outbox_.Add(NewOutboxMessage({d.message_id, "payment", "p-" + d.message_id, "PAY_QUEUE",
                                  "PaymentCreated", "ACC_QUEUE", ""},
                                 clock_.NowMillis(), RetryPolicy{}));
    AckListener listener(queue_, outbox_, DecodeAccountingReply, metrics_,
                         {"ACC_QUEUE", 256, keys});
    const uint64_t tag = queue_.Push(d);
    EXPECT_TRUE(listener.Step());
    return tag;
  }
  uint64_t Receive(const std::string& name, const MessageKeys* keys) {
    return Receive(Fixture(name), keys);
  }

  void ExpectAcknowledged(const std::string& name, uint64_t tag) {
    SCOPED_TRACE(name);
    EXPECT_EQ(outbox_.Row(Fixture(name).message_id).status, OutboxStatus::kSent);
    EXPECT_TRUE(queue_.acked.count(tag));
    EXPECT_FALSE(queue_.rejected.count(tag));
  }

  void ExpectDeadLettered(const std::string& name, uint64_t tag) {
    SCOPED_TRACE(name);
    EXPECT_EQ(outbox_.Row(Fixture(name).message_id).status, OutboxStatus::kSending);
    EXPECT_TRUE(queue_.rejected.count(tag));
  }

  ManualClock clock_;
  FakeConsumer queue_;
  InMemoryOutbox outbox_{clock_};
  MetricsRegistry metrics_;
  std::unique_ptr<MessageKeys> keys_;
};

// Replies have had no shard key: signed the same way from 0021044 to today.
TEST_F(PaymentAccountedFixturesTest, SignedRepliesCloseTheirRows) {
  ExpectAcknowledged("payment_accounted.0021044",
                     Receive("payment_accounted.0021044", keys_.get()));
}

TEST_F(PaymentAccountedFixturesTest, UnsignedRepliesAreDeadLetteredWhenKeysAreRequired) {
  for (const std::string name : {"payment_accounted.b5a0d70", "payment_accounted.51a1460"}) {
    ExpectDeadLettered(name, Receive(name, keys_.get()));
  }
}

TEST_F(PaymentAccountedFixturesTest, UnsignedRepliesCloseTheirRowsWhenUnsignedIsAllowed) {
  for (const std::string name : {"payment_accounted.b5a0d70", "payment_accounted.51a1460"}) {
    ExpectAcknowledged(name, Receive(name, /*keys=*/nullptr));
  }
}

// A cumulative reply (5ca9c6c on) closes both rows it lists.
TEST_F(PaymentAccountedFixturesTest, ASignedCumulativeReplyClosesEveryRowItLists) {
  const Delivery d = Fixture("payments_accounted.5ca9c6c");
  events::v1::PaymentsAccounted reply;
  ASSERT_TRUE(reply.ParseFromString(d.body));
  ASSERT_EQ(reply.accounted_size(), 2);
  for (const auto& a : reply.accounted()) {
    outbox_.Add(NewOutboxMessage(
        {a.message_id(), "payment", a.payment_id(), "PAY_QUEUE", "PaymentCreated", "ACC_QUEUE", ""},
        clock_.NowMillis(), RetryPolicy{}));
  }
  AckListener listener(queue_, outbox_, DecodeAccountingReply, metrics_,
                       {"ACC_QUEUE", 256, keys_.get()});
  const uint64_t tag = queue_.Push(d);
  ASSERT_TRUE(listener.Step());
  for (const auto& a : reply.accounted()) {
    EXPECT_EQ(outbox_.Row(a.message_id()).status, OutboxStatus::kSent) << a.message_id();
  }
  EXPECT_TRUE(queue_.acked.count(tag));
  EXPECT_EQ(listener.acknowledged(), 2);
}

// A newer accounting_service's reply with a field this proto does not
// define: protobuf skips it, and the signature (over the raw body) holds.
TEST_F(PaymentAccountedFixturesTest, FieldsThisProtoDoesNotDefineAreIgnored) {
  const Delivery d = Fixture("payment_accounted.future");
  events::v1::PaymentAccounted reply;
  ASSERT_TRUE(reply.ParseFromString(d.body));
  EXPECT_EQ(reply.GetReflection()->GetUnknownFields(reply).field_count(), 1);
  auto ack = DecodePaymentAccounted(d.body);
  ASSERT_OK(ack);
  EXPECT_EQ(ack->message_id, d.message_id);
  EXPECT_FALSE(ack->duplicate);
  ExpectAcknowledged("payment_accounted.future", Receive(d, keys_.get()));
}

// Every earlier PaymentCreated fixture, encoded from its own commit's proto,
// is what today's codec writes for the same event but for the fields added
// since: batch_replies_accepted and rejects_accepted, which older publishers
// leave unset (so accounting answers them one reply per message, and
// dead-letters what it will not book instead of rejecting it).
TEST(PaymentCreatedFixtureTest, TodaysCodecWritesEveryEarlierBodyAndAcceptsBatchReplies) {
  for (const std::string name :
       {"payment_created.b5a0d70", "payment_created.51a1460", "payment_created.0021044",
        "payment_created.149bbcf", "payment_created.0208c0e"}) {
    SCOPED_TRACE(name);
    auto d = ReadMessageFixture(kFixtures, name);
    ASSERT_OK(d);
    events::v1::PaymentCreated event;
    ASSERT_TRUE(event.ParseFromString(d->body));
    PaymentInput input;
    input.payer_account = "alice";
    input.payee_account = "bob";
    input.amount_minor = 12345;
    input.currency = "EUR";
    input.description = "fixture";
    EXPECT_FALSE(event.batch_replies_accepted());
    EXPECT_FALSE(event.rejects_accepted());
    event.set_batch_replies_accepted(true);
    event.set_rejects_accepted(true);
    EXPECT_EQ(EncodePaymentCreated(d->message_id, event.payment_id(), input, 1795312800000),
              event.SerializeAsString());
  }
}

// The newest fixture's bytes are today's but for rejects_accepted (field
// 11), which builds since write as well.
TEST(PaymentCreatedFixtureTest, TodaysCodecWritesTheNewestFixturesBytesPlusRejectsAccepted) {
  auto d = ReadMessageFixture(kFixtures, "payment_created.5ca9c6c");
  ASSERT_OK(d);
  events::v1::PaymentCreated event;
  ASSERT_TRUE(event.ParseFromString(d->body));
  EXPECT_TRUE(event.batch_replies_accepted());
  EXPECT_FALSE(event.rejects_accepted());
  event.set_rejects_accepted(true);
  PaymentInput input;
  input.payer_account = "alice";
  input.payee_account = "bob";
  input.amount_minor = 12345;
  input.currency = "EUR";
  input.description = "fixture";
  EXPECT_EQ(EncodePaymentCreated(d->message_id, event.payment_id(), input, 1795312800000),
            event.SerializeAsString());
  EXPECT_EQ(event.SerializeAsString(), d->body + std::string("X\x01"));  // field 11, varint 1
}

}  // namespace
}  // namespace outbox::payment
