#include "payment_service/payment.h"

#include <gtest/gtest.h>

#include "events/v1/events.pb.h"
#include "payment_service/payment_codec.h"
#include "shared/testing/status_matchers.h"

namespace outbox::payment {
namespace {

PaymentInput Valid() {
  PaymentInput in;
  in.idempotency_key = "key-1";
  in.payer_account = "alice";
  in.payee_account = "bob";
  in.amount_minor = 1250;
  in.currency = "EUR";
  in.description = "coffee";
  return in;
}

void ExpectInvalid(const PaymentInput& in, const std::string& field) {
  absl::Status s = ValidatePaymentInput(in);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find(field), std::string::npos) << s;
}

TEST(ValidatePaymentInputTest, AmountsAreBoundedByTheSetting) {
  PaymentInput in = Valid();
  in.amount_minor = kDefaultMaxAmountMinor;
  EXPECT_OK(ValidatePaymentInput(in));
  in.amount_minor = kDefaultMaxAmountMinor + 1;
  ExpectInvalid(in, "amount_minor must be at most 1000000000000");
  in.amount_minor = 9'223'372'036'854'775'807;  // INT64_MAX: accepted before
  ExpectInvalid(in, "amount_minor");
  in.amount_minor = 5000;
  EXPECT_TRUE(absl::IsInvalidArgument(ValidatePaymentInput(in, /*max_amount_minor=*/4999)));
}

TEST(ValidatePaymentInputTest, AcceptsAValidPayment) {
  EXPECT_OK(ValidatePaymentInput(Valid()));
}

TEST(ValidatePaymentInputTest, NamesTheBadField) {
  PaymentInput in = Valid();
  in.idempotency_key = "";
  ExpectInvalid(in, "idempotency_key");
  in = Valid();
  in.idempotency_key = std::string(129, 'k');
  ExpectInvalid(in, "idempotency_key");
  in = Valid();
  in.payer_account = "";
  ExpectInvalid(in, "payer_account");
  in = Valid();
  in.payee_account = std::string(65, 'p');
  ExpectInvalid(in, "payee_account");
  in = Valid();
  in.amount_minor = 0;
  ExpectInvalid(in, "amount_minor");
  in.amount_minor = -5;
  ExpectInvalid(in, "amount_minor");
  in = Valid();
  in.currency = "eur";
  ExpectInvalid(in, "currency");
  in.currency = "EURO";
  ExpectInvalid(in, "currency");
  in = Valid();
  in.description = std::string(257, 'd');
  ExpectInvalid(in, "description");
  in = Valid();
  in.payee_account = in.payer_account;
  ExpectInvalid(in, "payee_account");
  in = Valid();
  in.payer_account = "ali\nce";
  ExpectInvalid(in, "payer_account");
}

TEST(SameRequestTest, IgnoresTheKeyButNothingElse) {
  PaymentInput a = Valid();
  PaymentInput b = Valid();
  b.idempotency_key = "other";
  EXPECT_TRUE(SameRequest(a, b));
  b.amount_minor += 1;
  EXPECT_FALSE(SameRequest(a, b));
}

TEST(PaymentCodecTest, AReplyAcknowledgesItsMessageWithThePaymentAsBusinessKey) {
  events::v1::PaymentAccounted reply;
  reply.set_message_id("m1");
  reply.set_payment_id("p1");
  reply.set_duplicate(true);
  auto ack = DecodePaymentAccounted(reply.SerializeAsString());
  ASSERT_OK(ack);
  EXPECT_EQ(ack->message_id, "m1");
  EXPECT_EQ(ack->biz_key, "p1");
  EXPECT_TRUE(ack->duplicate);
}

TEST(PaymentCodecTest, ABatchReplyAcknowledgesEveryMessageItListsInOrder) {
  events::v1::PaymentsAccounted batch;
  for (const char* id : {"m1", "m2"}) {
    events::v1::PaymentAccounted* one = batch.add_accounted();
    one->set_message_id(id);
    one->set_payment_id(std::string("p") + id);
  }
  batch.mutable_accounted(1)->set_duplicate(true);
  batch.mutable_accounted(1)->set_rejected_reason("over the limit");
  batch.mutable_accounted(1)->set_accounted_at_unix_ms(1'700'000'000'123);
  Delivery reply;
  reply.type = kPaymentsAccountedType;
  reply.body = batch.SerializeAsString();
  auto acks = DecodeAccountingReply(reply);
  ASSERT_OK(acks);
  ASSERT_EQ(acks->size(), 2u);
  EXPECT_EQ((*acks)[0].message_id, "m1");
  EXPECT_EQ((*acks)[0].answered_at, 0);
  EXPECT_EQ((*acks)[1].biz_key, "pm2");
  EXPECT_TRUE((*acks)[1].duplicate);
  // When accounting answered (signed with the body): a reject made before
  // the row's last re-drive changes nothing (OnReject).
  EXPECT_EQ((*acks)[1].rejected_reason, "over the limit");
  EXPECT_EQ((*acks)[1].answered_at, 1'700'000'000'123);
}

TEST(PaymentCodecTest, ASingleReplyOfAnyOtherTypeAcknowledgesOneMessage) {
  events::v1::PaymentAccounted one;
  one.set_message_id("m1");
  for (const char* type : {"PaymentAccounted", ""}) {
    Delivery reply;
    reply.type = type;
    reply.body = one.SerializeAsString();
    auto acks = DecodeAccountingReply(reply);
    ASSERT_OK(acks);
    ASSERT_EQ(acks->size(), 1u);
    EXPECT_EQ((*acks)[0].message_id, "m1");
  }
}

TEST(PaymentCodecTest, ABatchReplyThatIsEmptyOrHasAnEntryWithoutMessageIdIsInvalid) {
  events::v1::PaymentsAccounted batch;
  EXPECT_TRUE(absl::IsInvalidArgument(DecodePaymentsAccounted(batch.SerializeAsString()).status()));
  batch.add_accounted()->set_message_id("m1");
  batch.add_accounted();
  auto acks = DecodePaymentsAccounted(batch.SerializeAsString());
  EXPECT_TRUE(absl::IsInvalidArgument(acks.status()));
  EXPECT_NE(acks.status().message().find("accounted[1]"), std::string::npos);
  EXPECT_TRUE(absl::IsInvalidArgument(DecodePaymentsAccounted("\xff\xff").status()));
}

TEST(PaymentCodecTest, RejectsGarbageAndMissingMessageId) {
  EXPECT_TRUE(absl::IsInvalidArgument(DecodePaymentAccounted("\xff\xff\xff").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(DecodePaymentAccounted("").status()));
}

}  // namespace
}  // namespace outbox::payment
