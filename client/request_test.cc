#include "client/request.h"

#include <gtest/gtest.h>

#include <set>

#include "google/protobuf/util/message_differencer.h"

namespace outbox::client {
namespace {

TEST(PaymentRequestTest, KeyIsPrefixAndIndex) {
  EXPECT_EQ(PaymentRequest("demo-abc-", 42, "d").idempotency_key(), "demo-abc-42");
  EXPECT_EQ(PaymentRequest(KeyPrefix("m", "run1"), 7, "d").idempotency_key(), "m-run1-7");
}

TEST(PaymentRequestTest, SameIndexSameRequest) {
  // A retry or a replay must send exactly the first request again.
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(PaymentRequest("k-", 1234, "x"),
                                                                 PaymentRequest("k-", 1234, "x")));
}

TEST(PaymentRequestTest, FieldsAreValid) {
  for (int64_t i : {0LL, 1LL, 36LL, 49LL, 1849LL, 9999LL, 10000LL, 123456789LL}) {
    const auto r = PaymentRequest("k-", i, "load");
    EXPECT_FALSE(r.payer_account().empty());
    EXPECT_FALSE(r.payee_account().empty());
    EXPECT_NE(r.payer_account(), r.payee_account()) << i;
    EXPECT_LE(r.payer_account().size(), 64u);
    EXPECT_GT(r.amount_minor(), 0) << i;
    EXPECT_EQ(r.amount_minor(), 100 + i % 10000);
    EXPECT_EQ(r.currency(), "EUR");
    EXPECT_EQ(r.description(), "load");
  }
}

TEST(PaymentRequestTest, AccountsVary) {
  std::set<std::string> payers, payees;
  for (int i = 0; i < 100; ++i) {
    payers.insert(PaymentRequest("k-", i, "").payer_account());
    payees.insert(PaymentRequest("k-", i, "").payee_account());
  }
  EXPECT_EQ(payers.size(), 50u);
  EXPECT_EQ(payees.size(), 37u);
}

TEST(RunIdTest, TwelveHexDigitsAndFresh) {
  const std::string a = RandomRunId();
  EXPECT_EQ(a.size(), 12u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos) << a;
  EXPECT_NE(a, RandomRunId());
  EXPECT_EQ(KeyPrefix("demo", a), "demo-" + a + "-");
}

}  // namespace
}  // namespace outbox::client
