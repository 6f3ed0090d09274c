#include "shared/outbox/state_machine.h"

#include <gtest/gtest.h>

#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

constexpr int64_t kNow = 1'000'000;

RetryPolicy Policy() {
  RetryPolicy p;
  p.base_delay = absl::Seconds(2);
  p.max_delay = absl::Seconds(5);
  p.max_attempts = 3;
  return p;
}

OutboxMessage Fresh() {
  return NewOutboxMessage({"m-1", "order", "p-1", "EVENTS", "OrderPlaced", "REPLIES", "body"}, kNow,
                          Policy());
}

OutboxMessage InStatus(OutboxStatus s) {
  OutboxMessage row = Fresh();
  row.status = s;
  return row;
}

TEST(RetryPolicyTest, LinearUpToTheCap) {
  RetryPolicy p = Policy();
  EXPECT_EQ(p.DelayAfter(0), absl::Seconds(2));
  EXPECT_EQ(p.DelayAfter(1), absl::Seconds(2));
  EXPECT_EQ(p.DelayAfter(2), absl::Seconds(4));
  EXPECT_EQ(p.DelayAfter(3), absl::Seconds(5));
  EXPECT_EQ(p.DelayAfter(1000), absl::Seconds(5));
}

TEST(RetryPolicyTest, ValidateNamesTheBadSetting) {
  EXPECT_OK(Policy().Validate());
  RetryPolicy p = Policy();
  p.base_delay = absl::ZeroDuration();
  EXPECT_TRUE(absl::IsInvalidArgument(p.Validate()));
  p = Policy();
  p.max_delay = absl::Seconds(1);
  EXPECT_NE(p.Validate().message().find("max delay"), std::string::npos);
  p = Policy();
  p.max_attempts = 0;
  EXPECT_NE(p.Validate().message().find("max attempts"), std::string::npos);
}

TEST(NewOutboxMessageTest, CountsTheFastPathPublishAsAttemptOneAndStoresTheBudget) {
  OutboxMessage row = Fresh();
  EXPECT_EQ(row.status, OutboxStatus::kSending);
  EXPECT_EQ(row.attempts, 1);
  EXPECT_EQ(row.max_attempts, 3);
  EXPECT_EQ(row.last_attempt_at, kNow);
  EXPECT_EQ(row.next_retry_at, kNow + 2000);
  EXPECT_EQ(row.created_at, kNow);
  EXPECT_EQ(row.sent_at, 0);
  EXPECT_EQ(row.message_type, "OrderPlaced");
  OutgoingMessage out = ToOutgoing(row);
  EXPECT_EQ(out.topic, "EVENTS");
  EXPECT_EQ(out.message_id, "m-1");
  EXPECT_EQ(out.body, "body");
  EXPECT_EQ(out.reply_to, "REPLIES");
  EXPECT_EQ(out.type, "OrderPlaced");
}

TEST(OnDueTest, NotDueBeforeNextRetryOrOutsideSending) {
  OutboxMessage row = Fresh();
  EXPECT_EQ(OnDue(row, kNow + 1999, Policy()), DueAction::kNotDue);
  EXPECT_EQ(row.attempts, 1);
  for (OutboxStatus s : {OutboxStatus::kSent, OutboxStatus::kFailed}) {
    OutboxMessage other = InStatus(s);
    const OutboxMessage before = other;
    EXPECT_EQ(OnDue(other, kNow + 100'000, Policy()), DueAction::kNotDue);
    EXPECT_EQ(other.status, before.status);
    EXPECT_EQ(other.attempts, before.attempts);
  }
}

TEST(OnDueTest, RepublishesWithLinearBackoffThenExhaustsAtTheStoredBudget) {
  OutboxMessage row = Fresh();
  int64_t now = row.next_retry_at;
  ASSERT_EQ(OnDue(row, now, Policy()), DueAction::kRepublish);
  EXPECT_EQ(row.attempts, 2);
  EXPECT_EQ(row.last_attempt_at, now);
  EXPECT_EQ(row.next_retry_at, now + 4000);
  now = row.next_retry_at;
  ASSERT_EQ(OnDue(row, now, Policy()), DueAction::kRepublish);
  EXPECT_EQ(row.attempts, 3);
  EXPECT_EQ(row.next_retry_at, now + 5000);  // capped
  now = row.next_retry_at;
  ASSERT_EQ(OnDue(row, now, Policy()), DueAction::kExhausted);
  EXPECT_EQ(row.status, OutboxStatus::kFailed);
  EXPECT_EQ(row.attempts, 3);
  EXPECT_EQ(row.updated_at, now);
  EXPECT_EQ(row.last_error, "no acknowledgement after 3 attempts");
}

TEST(OnDueTest, AnExhaustedRowKeepsItsLastPublishError) {
  OutboxMessage row = Fresh();
  row.attempts = 3;
  row.last_error = "nack";
  ASSERT_EQ(OnDue(row, row.next_retry_at, Policy()), DueAction::kExhausted);
  EXPECT_EQ(row.last_error, "nack");
}

TEST(OnDueTest, TheRowsBudgetWinsOverTheRetriersPolicy) {
  OutboxMessage row = Fresh();  // written with max_attempts 3
  RetryPolicy generous = Policy();
  generous.max_attempts = 100;
  row.attempts = 3;
  EXPECT_EQ(OnDue(row, row.next_retry_at, generous), DueAction::kExhausted);
}

TEST(OnAckTest, ClosesSendingAndIgnoresDuplicates) {
  OutboxMessage row = Fresh();
  row.last_error = "nack";
  ASSERT_EQ(OnAck(row, kNow + 50), AckEffect::kClosed);
  EXPECT_EQ(row.status, OutboxStatus::kSent);
  EXPECT_EQ(row.sent_at, kNow + 50);
  EXPECT_EQ(row.last_error, "");
  EXPECT_EQ(OnAck(row, kNow + 60), AckEffect::kAlreadySent);
  EXPECT_EQ(row.sent_at, kNow + 50);
}

TEST(OnAckTest, ALateAckClosesAFailedRowAndKeepsWhyItFailed) {
  OutboxMessage failed = InStatus(OutboxStatus::kFailed);
  failed.attempts = 3;
  failed.last_error = "no acknowledgement";
  ASSERT_EQ(OnAck(failed, kNow + 70), AckEffect::kLateClosed);
  EXPECT_EQ(failed.status, OutboxStatus::kSent);
  EXPECT_EQ(failed.sent_at, kNow + 70);
  EXPECT_EQ(failed.updated_at, kNow + 70);
  EXPECT_EQ(failed.last_error, "no acknowledgement");
  EXPECT_EQ(failed.attempts, 3);
  EXPECT_EQ(OnAck(failed, kNow + 80), AckEffect::kAlreadySent);
  EXPECT_EQ(failed.sent_at, kNow + 70);
}

TEST(OnHoldTest, PushesADueRowWithoutSpendingAnAttempt) {
  OutboxMessage row = Fresh();  // attempt 1 counted, due after base (2 s)
  const int64_t due = row.next_retry_at;
  EXPECT_FALSE(OnHold(row, due - 1, Policy()));  // not due yet: unchanged
  EXPECT_EQ(row.next_retry_at, due);
  ASSERT_TRUE(OnHold(row, due + 5, Policy()));
  EXPECT_EQ(row.attempts, 1);
  EXPECT_EQ(row.status, OutboxStatus::kSending);
  EXPECT_EQ(row.next_retry_at, due + 5 + 2000);  // the wait after attempt 1 again
  EXPECT_EQ(row.updated_at, due + 5);
  row.attempts = 2;  // later attempts wait longer, as their backoff says
  const int64_t later = row.next_retry_at;
  ASSERT_TRUE(OnHold(row, later, Policy()));
  EXPECT_EQ(row.attempts, 2);
  EXPECT_EQ(row.next_retry_at, later + 4000);
  // An exhausted row is held too: its copies may still be in the queue.
  row.attempts = row.max_attempts;
  ASSERT_TRUE(OnHold(row, row.next_retry_at, Policy()));
  EXPECT_EQ(row.status, OutboxStatus::kSending);
  for (OutboxStatus s : {OutboxStatus::kSent, OutboxStatus::kFailed}) {
    OutboxMessage other = InStatus(s);
    EXPECT_FALSE(OnHold(other, other.next_retry_at + 1000, Policy()));
  }
}

TEST(OnPublishFailureTest, NotesTheErrorOnSendingRowsOnly) {
  OutboxMessage row = Fresh();
  EXPECT_TRUE(OnPublishFailure(row, "nack", kNow + 5));
  EXPECT_EQ(row.last_error, "nack");
  EXPECT_EQ(row.attempts, 1);  // counted when the publish started
  EXPECT_EQ(row.status, OutboxStatus::kSending);
  for (OutboxStatus s : {OutboxStatus::kSent, OutboxStatus::kFailed}) {
    OutboxMessage other = InStatus(s);
    EXPECT_FALSE(OnPublishFailure(other, "late", kNow + 5));
    EXPECT_EQ(other.last_error, "");
  }
}

TEST(OnRedriveTest, OnlyFailedRowsGetAFreshBudgetDueNow) {
  OutboxMessage row = InStatus(OutboxStatus::kFailed);
  row.attempts = 3;
  row.last_error = "no ack";
  ASSERT_OK(OnRedrive(row, kNow + 9));
  EXPECT_EQ(row.status, OutboxStatus::kSending);
  EXPECT_EQ(row.attempts, 0);
  EXPECT_EQ(row.next_retry_at, kNow + 9);
  EXPECT_EQ(row.last_error, "");
  EXPECT_EQ(OnDue(row, kNow + 9, Policy()), DueAction::kRepublish);
  for (OutboxStatus s : {OutboxStatus::kSending, OutboxStatus::kSent}) {
    OutboxMessage other = InStatus(s);
    absl::Status st = OnRedrive(other, kNow);
    EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
    EXPECT_NE(st.message().find(StatusName(s)), absl::string_view::npos);
  }
}

TEST(OnResendTest, OnlySentRowsGoBackToSendingWithAFreshBudgetDueNow) {
  OutboxMessage row = InStatus(OutboxStatus::kSent);
  row.attempts = 2;
  row.sent_at = kNow - 5;
  ASSERT_OK(OnResend(row, "repaired: SENT without a voucher", kNow + 9));
  EXPECT_EQ(row.status, OutboxStatus::kSending);
  EXPECT_EQ(row.attempts, 0);
  EXPECT_EQ(row.next_retry_at, kNow + 9);
  EXPECT_EQ(row.sent_at, 0);
  EXPECT_EQ(row.last_error, "repaired: SENT without a voucher");
  EXPECT_EQ(row.failure_kind, "");
  EXPECT_EQ(OnDue(row, kNow + 9, Policy()), DueAction::kRepublish);
  EXPECT_EQ(OnAck(row, kNow + 10), AckEffect::kClosed);
  for (OutboxStatus s : {OutboxStatus::kSending, OutboxStatus::kFailed}) {
    OutboxMessage other = InStatus(s);
    absl::Status st = OnResend(other, "again", kNow);
    EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
    EXPECT_NE(st.message().find(StatusName(s)), absl::string_view::npos);
  }
}

TEST(StatusNameTest, RoundTripsAndRejectsUnknown) {
  for (OutboxStatus s : kAllStatuses) EXPECT_EQ(*ParseStatus(StatusName(s)), s);
  EXPECT_TRUE(absl::IsInvalidArgument(ParseStatus("LOST").status()));
}

}  // namespace
}  // namespace outbox
