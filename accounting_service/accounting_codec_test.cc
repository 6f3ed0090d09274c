#include "accounting_service/accounting_codec.h"

#include <gtest/gtest.h>

#include "events/v1/events.pb.h"
#include "shared/testing/status_matchers.h"

namespace outbox::accounting {
namespace {

std::string Body(const std::string& message_id, int64_t amount, const std::string& currency) {
  events::v1::PaymentCreated m;
  m.set_message_id(message_id);
  m.set_payment_id("p1");
  m.set_payer_account("alice");
  m.set_payee_account("bob");
  m.set_amount_minor(amount);
  m.set_currency(currency);
  return m.SerializeAsString();
}

TEST(DecodePaymentCreatedTest, AcceptsAGoodMessage) {
  auto e = DecodePaymentCreated(Body("m1", 10, "EUR"), "m1");
  ASSERT_OK(e);
  EXPECT_EQ(e->payment_id, "p1");
  EXPECT_EQ(e->amount_minor, 10);
}

TEST(DecodePaymentCreatedTest, RejectsWhatMustBeDeadLettered) {
  EXPECT_TRUE(absl::IsInvalidArgument(DecodePaymentCreated("not protobuf \xff\xff", "").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(DecodePaymentCreated("", "").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(DecodePaymentCreated(Body("m1", 0, "EUR"), "m1").status()));
  // Larger than any payment may be: never booked.
  EXPECT_TRUE(absl::IsInvalidArgument(
      DecodePaymentCreated(Body("m1", kDefaultMaxAmountMinor + 1, "EUR"), "m1").status()));
  EXPECT_OK(DecodePaymentCreated(Body("m1", 100, "EUR"), "m1", 100));
  EXPECT_TRUE(
      absl::IsInvalidArgument(DecodePaymentCreated(Body("m1", 101, "EUR"), "m1", 100).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(DecodePaymentCreated(Body("m1", 5, "eu"), "m1").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(DecodePaymentCreated(Body("", 5, "EUR"), "").status()));
  // The AMQP property and the body must agree.
  EXPECT_TRUE(absl::IsInvalidArgument(DecodePaymentCreated(Body("m1", 5, "EUR"), "m2").status()));
}

}  // namespace
}  // namespace outbox::accounting
