// Today's consumer against PaymentCreated messages as earlier builds
// published them (tests/fixtures/messages/README.md): each goes through the
// consumer role, as accounting_service configures it, and VoucherHandler into
// a real accounting.db, as during a rolling upgrade.
#include <gtest/gtest.h>

#include <filesystem>

#include "accounting_service/accounting_codec.h"
#include "accounting_service/booking_for_tests.h"
#include "accounting_service/voucher_handler.h"
#include "accounting_service/voucher_store.h"
#include "events/v1/events.pb.h"
#include "shared/testing/fakes.h"
#include "shared/testing/message_fixtures.h"
#include "shared/testing/sequential_ids.h"
#include "shared/testing/status_matchers.h"

namespace outbox::accounting {
namespace {

using ::outbox::testing::FakeConsumer;
using ::outbox::testing::FakePublisher;
using ::outbox::testing::ManualClock;
using ::outbox::testing::ReadFixtureKeys;
using ::outbox::testing::ReadMessageFixture;

const std::string kFixtures = std::string(OUTBOX_SOURCE_DIR) + "/tests/fixtures/messages";

class PaymentCreatedFixturesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/voucher_handler_fixtures_test.XXXXXX";
    dir_ = mkdtemp(tmpl);
    auto store = VoucherStore::Open(dir_ + "/accounting.db", DbOptions{}, ids_, clock_);
    ASSERT_OK(store);
    store_ = std::move(store).value();
    auto keys = ReadFixtureKeys(kFixtures);
    ASSERT_OK(keys);
    keys_ = std::make_unique<MessageKeys>(std::move(keys).value());
  }
  void TearDown() override {
    consumer_.reset();
    handler_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  Delivery Fixture(const std::string& name) {
    auto d = ReadMessageFixture(kFixtures, name);
    EXPECT_OK(d);
    return d.ok() ? *d : Delivery{};
  }

  // One consumer turn over the fixture: with `keys` the deployment's
  // MESSAGE_KEYS_FILE, null as with --allow_unsigned_messages. Returns the
  // delivery's tag.
  uint64_t Consume(const std::string& name, const MessageKeys* keys) {
    return Consume(Fixture(name), keys);
  }
  // A test consumes with one choice of keys: the consumer is made at its
  // first turn and kept for the others.
  uint64_t Consume(const Delivery& d, const MessageKeys* keys) {
    if (consumer_ == nullptr) {
      auto queue = std::make_unique<FakeConsumer>();
      auto replies = std::make_unique<FakePublisher>();
      queue_ = queue.get();
      replies_ = replies.get();
      handler_ = std::make_unique<VoucherHandler>(*store_, clock_, BookingRules{});
      auto consumer = AccountingConsumer(*handler_, clock_, metrics_, std::move(queue),
                                         std::move(replies), keys);
      EXPECT_OK(consumer);
      if (!consumer.ok()) return 0;
      consumer_ = std::move(consumer).value();
      keys_used_ = keys;
    }
    EXPECT_EQ(keys, keys_used_);
    const uint64_t tag = queue_->Push(d);
    EXPECT_TRUE(consumer_->Step());
    return tag;
  }

  // The fixture was booked as its build meant: a voucher with the event's
  // fields, a reply to its reply_to, the delivery acked.
  void ExpectBooked(const std::string& name, uint64_t tag) {
    SCOPED_TRACE(name);
    const Delivery d = Fixture(name);
    events::v1::PaymentCreated event;
    ASSERT_TRUE(event.ParseFromString(d.body));
    auto voucher = store_->GetByPayment(event.payment_id());
    ASSERT_OK(voucher);
    EXPECT_EQ(voucher->message_id, d.message_id);
    EXPECT_EQ(voucher->debit_account, "alice");
    EXPECT_EQ(voucher->credit_account, "bob");
    EXPECT_EQ(voucher->amount_minor, 12345);
    EXPECT_EQ(voucher->currency, "EUR");
    EXPECT_EQ(voucher->traceparent, d.traceparent);
    EXPECT_EQ(RepliesTo(d.message_id), 1);
    EXPECT_TRUE(queue_->acked.count(tag));
    EXPECT_FALSE(queue_->rejected.count(tag));
  }

  void ExpectDeadLettered(const std::string& name, uint64_t tag) {
    SCOPED_TRACE(name);
    const Delivery d = Fixture(name);
    events::v1::PaymentCreated event;
    ASSERT_TRUE(event.ParseFromString(d.body));
    EXPECT_TRUE(absl::IsNotFound(store_->GetByPayment(event.payment_id()).status()));
    EXPECT_EQ(RepliesTo(d.message_id), 0);
    EXPECT_TRUE(queue_->rejected.count(tag));
  }

  int RepliesTo(const std::string& message_id) const {
    int n = 0;
    for (const OutgoingMessage& m : replies_->published) {
      if (m.message_id != message_id) continue;
      EXPECT_EQ(m.topic, "ACC_QUEUE");
      EXPECT_EQ(m.type, "PaymentAccounted");
      ++n;
    }
    return n;
  }

  std::string dir_;
  testing::SequentialIds ids_{"v-"};
  ManualClock clock_;
  std::unique_ptr<VoucherStore> store_;
  std::unique_ptr<MessageKeys> keys_;
  MetricsRegistry metrics_;
  std::unique_ptr<VoucherHandler> handler_;
  std::unique_ptr<Consumer> consumer_;
  const MessageKeys* keys_used_ = nullptr;
  FakeConsumer* queue_ = nullptr;  // the consumer's fake broker links
  FakePublisher* replies_ = nullptr;
};

// Messages signed as today, from 0208c0e on (0.1.0 and 0.2.0 included).
TEST_F(PaymentCreatedFixturesTest, TodaysFormatIsBooked) {
  ExpectBooked("payment_created.0208c0e", Consume("payment_created.0208c0e", keys_.get()));
}

// Signed over id, type, reply_to and body, with no shard key header: the
// signed bytes are today's for a message without a shard key.
// A publisher that accepts cumulative replies (5ca9c6c on) is answered with
// a PaymentsAccounted listing its message; every earlier form, above and
// below, with a PaymentAccounted of its own.
TEST_F(PaymentCreatedFixturesTest, TheBatchReplyFormIsAnsweredWithAPaymentsAccounted) {
  const Delivery d = Fixture("payment_created.5ca9c6c");
  const uint64_t tag = Consume(d, keys_.get());
  EXPECT_TRUE(queue_->acked.count(tag));
  EXPECT_EQ(RepliesTo(d.message_id), 0);
  ASSERT_EQ(replies_->published.size(), 1u);
  EXPECT_EQ(replies_->published[0].type, "PaymentsAccounted");
  events::v1::PaymentsAccounted reply;
  ASSERT_TRUE(reply.ParseFromString(replies_->published[0].body));
  ASSERT_EQ(reply.accounted_size(), 1);
  EXPECT_EQ(reply.accounted(0).message_id(), d.message_id);
  EXPECT_EQ(reply.accounted(0).traceparent().substr(0, 36), d.traceparent.substr(0, 36));
}

TEST_F(PaymentCreatedFixturesTest, SignedBeforeShardKeysIsBooked) {
  ExpectBooked("payment_created.0021044", Consume("payment_created.0021044", keys_.get()));
}

// From 149bbcf to 0208c0e every event carried x-outbox-shard-key outside its
// signature. Today the signature must cover a shard key that is present (a
// replay under another key would reach a shard without the payment's dedup
// record), so such an event is dead-lettered, never booked; its outbox row
// is still SENDING and recovery_service re-publishes it, signed as today.
TEST_F(PaymentCreatedFixturesTest, AShardKeyOutsideTheSignatureIsRefused) {
  Delivery d = Fixture("payment_created.149bbcf");
  ASSERT_FALSE(d.shard_key.empty());
  EXPECT_TRUE(absl::IsUnauthenticated(keys_->Verify(d)));
  d.shard_key.clear();  // the bytes 149bbcf signed
  EXPECT_OK(keys_->Verify(d));

  ExpectDeadLettered("payment_created.149bbcf", Consume("payment_created.149bbcf", keys_.get()));
  EXPECT_NE(metrics_.Render().find("outbox_unauthenticated_messages_total{queue=\"PAY_QUEUE\"} 1"),
            std::string::npos);
}

// Before 0021044 nothing was signed: accepted only while unsigned messages
// are allowed (--allow_unsigned_messages), dead-lettered otherwise.
TEST_F(PaymentCreatedFixturesTest, UnsignedFormatsAreDeadLetteredWhenKeysAreRequired) {
  for (const std::string name : {"payment_created.b5a0d70", "payment_created.51a1460"}) {
    EXPECT_TRUE(Fixture(name).signature.empty());
    ExpectDeadLettered(name, Consume(name, keys_.get()));
  }
}

TEST_F(PaymentCreatedFixturesTest, UnsignedFormatsAreBookedWhenUnsignedIsAllowed) {
  for (const std::string name : {"payment_created.b5a0d70", "payment_created.51a1460"}) {
    ExpectBooked(name, Consume(name, /*keys=*/nullptr));
  }
}

// Protobuf skips fields a message type does not define, so a newer
// payment_service may add fields (under new numbers) and today's accounting
// still books its events. The signature is over the body's raw bytes, not
// over the fields this build knows, so the extra fields are verified too.
TEST_F(PaymentCreatedFixturesTest, FieldsThisProtoDoesNotDefineAreIgnored) {
  const Delivery d = Fixture("payment_created.future");
  events::v1::PaymentCreated event;
  ASSERT_TRUE(event.ParseFromString(d.body));
  const google::protobuf::UnknownFieldSet& unknown = event.GetReflection()->GetUnknownFields(event);
  ASSERT_EQ(unknown.field_count(), 2);
  EXPECT_EQ(unknown.field(0).number(), 9);
  EXPECT_EQ(unknown.field(1).number(), 1000);
  EXPECT_OK(keys_->Verify(d));

  auto decoded = DecodePaymentCreated(d.body, d.message_id);
  ASSERT_OK(decoded);
  EXPECT_EQ(decoded->payment_id, event.payment_id());
  EXPECT_EQ(decoded->amount_minor, 12345);

  ExpectBooked("payment_created.future", Consume("payment_created.future", keys_.get()));
}

// The same, for any event: an unknown field appended to a valid one and
// signed as a newer build would sign it.
TEST_F(PaymentCreatedFixturesTest, AnAppendedUnknownFieldIsBooked) {
  Delivery d = Fixture("payment_created.0208c0e");
  d.body += std::string("\xa8\x06\x01", 3);  // field 101, varint 1
  d.signature = keys_->Sign(Forward(d, ""));
  ExpectBooked("payment_created.0208c0e", Consume(d, keys_.get()));
}

// The reply fixture signed as today is what today's codec writes.
TEST(PaymentAccountedFixtureTest, TodaysCodecWritesTheFixturesBytes) {
  auto d = ReadMessageFixture(kFixtures, "payment_accounted.0021044");
  ASSERT_OK(d);
  EXPECT_EQ(EncodePaymentAccounted(d->message_id, "00210440-0000-4000-8000-000000000103",
                                   "00210440-0000-4000-8000-000000000203",
                                   /*duplicate=*/false, 1795312800250),
            d->body);
}

}  // namespace
}  // namespace outbox::accounting
