#include "shared/outbox/internal/state_machine.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "shared/outbox/internal/failure.h"
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

TEST(MessageSpecTest, OfNamesTheTypeTheKeyAndThePayload) {
  const MessageSpec spec = MessageSpec::Of("OrderPlaced", "o-1", "body");
  EXPECT_EQ(spec.message_type, "OrderPlaced");
  EXPECT_EQ(spec.biz_type, "OrderPlaced");
  EXPECT_EQ(spec.biz_key, "o-1");
  EXPECT_EQ(spec.payload, "body");
  EXPECT_EQ(spec.message_id, "");  // the producer's: a time-ordered UUID
  EXPECT_EQ(spec.topic, "");       // the producer's queue
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

// A topic's own policy applies at each claim, its max_attempts in place of
// the budget stored in the row; other topics keep theirs.
TEST(OnDueTest, ATopicsPolicyReplacesTheStoredBudgetAtTheNextClaim) {
  RetryPolicy policy = Policy();
  policy.topics["EVENTS"] = {absl::Seconds(10), 5, absl::ZeroDuration()};
  OutboxMessage row = Fresh();  // written with max_attempts 3
  row.attempts = 3;
  EXPECT_EQ(OnDue(row, row.next_retry_at, policy), DueAction::kRepublish);
  EXPECT_EQ(row.max_attempts, 5);
  // 10 s * attempt 4, capped at the max delay (5 s, raised to the topic's 10 s base).
  EXPECT_EQ(row.next_retry_at - row.last_attempt_at, 10'000);
  OutboxMessage other = Fresh();
  other.topic = "OTHER";
  other.attempts = 3;
  EXPECT_EQ(OnDue(other, other.next_retry_at, policy), DueAction::kExhausted);
  // New rows of the topic are written with its budget and first delay.
  OutboxMessage fresh = NewOutboxMessage(
      {"m-2", "order", "p-2", "EVENTS", "OrderPlaced", "REPLIES", ""}, kNow, policy);
  EXPECT_EQ(fresh.max_attempts, 5);
  EXPECT_EQ(fresh.next_retry_at, kNow + 10'000);
}

TEST(OnDueTest, ARowOlderThanTheMaxAgeExpiresInsteadOfARepublish) {
  RetryPolicy policy = Policy();
  policy.max_age = absl::Minutes(1);
  OutboxMessage row = Fresh();
  EXPECT_EQ(OnDue(row, kNow + 60'000, policy), DueAction::kRepublish);  // exactly 1 min: not yet
  row.next_retry_at = kNow;
  EXPECT_EQ(OnDue(row, kNow + 60'001, policy), DueAction::kExhausted);
  EXPECT_EQ(row.status, OutboxStatus::kFailed);
  EXPECT_EQ(row.failure_kind, kFailureExpired);
  EXPECT_EQ(row.last_error, "older than the max age of 1m after 2 attempts");
  EXPECT_EQ(row.failure_group, FailureGroupOf("EVENTS", kFailureExpired, row.last_error));
}

TEST(OnRejectTest, FailsSendingAndFailedRowsAtOnceNeverSentOnes) {
  OutboxMessage row = Fresh();
  EXPECT_TRUE(OnReject(row, "amount 5 over 4", kNow + 1));
  EXPECT_EQ(row.status, OutboxStatus::kFailed);
  EXPECT_EQ(row.failure_kind, kFailureRejected);
  EXPECT_EQ(row.last_error, "amount 5 over 4");
  EXPECT_EQ(row.attempts, 1);
  EXPECT_FALSE(OnReject(row, "amount 5 over 4", kNow + 2));  // a copy's reply: unchanged
  OutboxMessage exhausted = InStatus(OutboxStatus::kFailed);
  exhausted.failure_kind = kFailureExhausted;
  EXPECT_TRUE(OnReject(exhausted, "no", kNow));
  EXPECT_EQ(exhausted.failure_kind, kFailureRejected);
  OutboxMessage sent = InStatus(OutboxStatus::kSent);
  EXPECT_FALSE(OnReject(sent, "no", kNow));
  EXPECT_EQ(sent.status, OutboxStatus::kSent);
}

TEST(OnAcknowledgeFailureTest, MarksFailedRowsOnlyAndARedriveClearsIt) {
  OutboxMessage row = Fresh();
  EXPECT_THAT(OnAcknowledgeFailure(row, "alice", kNow),
              testing::StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_TRUE(OnReject(row, "no", kNow));
  ASSERT_OK(OnAcknowledgeFailure(row, "alice", kNow + 1));
  EXPECT_EQ(row.acknowledged_by, "alice");
  EXPECT_EQ(row.status, OutboxStatus::kFailed);
  ASSERT_OK(OnRedrive(row, kNow + 2));
  EXPECT_EQ(row.acknowledged_by, "");
  EXPECT_EQ(row.failure_kind, "");
  EXPECT_EQ(row.failure_group, "");
}

TEST(FailurePatternTest, TakesOutIdsNumbersAndQuotedValues) {
  EXPECT_EQ(FailurePattern("quantity 2000033 is over the shop's limit of 1000000"),
            "quantity # is over the shop's limit of #");
  EXPECT_EQ(FailurePattern("currency 'GBP' is not kept"), "currency '*' is not kept");
  EXPECT_EQ(FailurePattern("message 01a21bc4-86eb-7469-83ad-38fc3b81e315 returned: NO_ROUTE"),
            "message * returned: NO_ROUTE");
  EXPECT_EQ(FailurePattern("no acknowledgement after 10 attempts"),
            "no acknowledgement after # attempts");
  EXPECT_EQ(FailurePattern("at 2026-11-27"), "at #-#-#");
  // Same shape, same group; another topic or kind, another group.
  EXPECT_EQ(FailureGroupOf("T", "rejected", "over 5"), FailureGroupOf("T", "rejected", "over 77"));
  EXPECT_NE(FailureGroupOf("T", "rejected", "over 5"), FailureGroupOf("U", "rejected", "over 5"));
  EXPECT_NE(FailureGroupOf("T", "rejected", "over 5"), FailureGroupOf("T", "exhausted", "over 5"));
  EXPECT_EQ(FailureGroupOf("T", "rejected", "x").size(), 12u);
}

TEST(TopicRetryTest, ParsesFormatsAndNamesWhatIsWrong) {
  RetryPolicy defaults = Policy();
  auto topics =
      ParseTopicRetry("invoices:base_delay=30s,max_attempts=20; orders:max_age=1h", defaults);
  ASSERT_OK(topics);
  ASSERT_EQ(topics->size(), 2u);
  EXPECT_EQ(topics->at("invoices").base_delay, absl::Seconds(30));
  EXPECT_EQ(topics->at("invoices").max_attempts, 20);
  EXPECT_EQ(topics->at("orders").base_delay, absl::Seconds(2));  // the default's
  EXPECT_EQ(topics->at("orders").max_age, absl::Hours(1));
  EXPECT_EQ(FormatTopicRetry(*topics),
            "invoices:base_delay=30s,max_attempts=20,max_age=0;"
            "orders:base_delay=2s,max_attempts=3,max_age=1h");
  EXPECT_OK(ParseTopicRetry("", defaults));
  EXPECT_THAT(ParseTopicRetry("orders", defaults).status(),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::HasSubstr("TOPIC:KEY=VALUE")));
  EXPECT_THAT(ParseTopicRetry("orders:speed=2", defaults).status(),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::HasSubstr("unknown key 'speed'")));
  EXPECT_THAT(
      ParseTopicRetry("orders:max_attempts=0", defaults).status(),
      testing::StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("orders")));
  EXPECT_THAT(ParseTopicRetry("a:max_age=1s;a:max_age=2s", defaults).status(),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("twice")));
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

TEST(OnHoldTest, ARowWhoseLastPublishFailedStaysDue) {
  OutboxMessage row = Fresh();
  const int64_t due = row.next_retry_at;
  ASSERT_TRUE(OnPublishFailure(row, "publish confirm timed out", kNow + 5));
  EXPECT_FALSE(OnHold(row, due + 5, Policy()));  // no copy of it is queued
  EXPECT_EQ(row.next_retry_at, due);
  // Claimed again and published: the error was that of an earlier publish,
  // and this copy may be queued, so it waits like any other.
  ASSERT_EQ(OnDue(row, due + 5, Policy()), DueAction::kRepublish);
  EXPECT_EQ(row.last_error, "");
  EXPECT_TRUE(OnHold(row, row.next_retry_at, Policy()));
}

TEST(OnDueTest, AnExhaustedRowWhoseLastPublishWasConfirmedWasNotAcknowledged) {
  OutboxMessage row = Fresh();
  ASSERT_TRUE(OnPublishFailure(row, "nack", kNow + 5));                       // the first publish
  ASSERT_EQ(OnDue(row, row.next_retry_at, Policy()), DueAction::kRepublish);  // confirmed
  row.attempts = row.max_attempts;
  ASSERT_EQ(OnDue(row, row.next_retry_at, Policy()), DueAction::kExhausted);
  EXPECT_EQ(row.last_error,
            absl::StrCat("no acknowledgement after ", row.max_attempts, " attempts"));
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

// A reject answers one round of copies: one the consumer made before the row
// was re-driven (or repaired) changes nothing; one made since, or one that
// says no time, fails it.
TEST(OnRejectTest, ARejectMadeBeforeTheLastRestartChangesNothing) {
  OutboxMessage row = InStatus(OutboxStatus::kFailed);
  ASSERT_OK(OnRedrive(row, kNow + 100));
  EXPECT_FALSE(OnReject(row, "no", kNow + 200, /*answered_at=*/kNow + 99));
  EXPECT_EQ(row.status, OutboxStatus::kSending);
  EXPECT_EQ(row.failure_kind, "");
  EXPECT_TRUE(OnReject(row, "no", kNow + 200, /*answered_at=*/kNow + 100));
  EXPECT_EQ(row.status, OutboxStatus::kFailed);
  EXPECT_EQ(row.failure_kind, kFailureRejected);
  OutboxMessage other = InStatus(OutboxStatus::kFailed);
  ASSERT_OK(OnRedrive(other, kNow + 100));
  EXPECT_TRUE(OnReject(other, "no", kNow + 200, /*answered_at=*/0));  // not said: as before
  OutboxMessage never = Fresh();
  EXPECT_TRUE(OnReject(never, "no", kNow + 200, /*answered_at=*/1));  // never restarted
}

TEST(OnRedriveTest, OnlyFailedRowsGetAFreshBudgetDueNow) {
  OutboxMessage row = InStatus(OutboxStatus::kFailed);
  row.attempts = 3;
  row.last_error = "no ack";
  ASSERT_OK(OnRedrive(row, kNow + 9));
  EXPECT_EQ(row.status, OutboxStatus::kSending);
  EXPECT_EQ(row.attempts, 0);
  EXPECT_EQ(row.next_retry_at, kNow + 9);
  EXPECT_EQ(row.restarted_at, kNow + 9);
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
  ASSERT_OK(OnResend(row, "repaired: SENT without its booking", kNow + 9));
  EXPECT_EQ(row.status, OutboxStatus::kSending);
  EXPECT_EQ(row.attempts, 0);
  EXPECT_EQ(row.next_retry_at, kNow + 9);
  EXPECT_EQ(row.restarted_at, kNow + 9);
  EXPECT_EQ(row.sent_at, 0);
  EXPECT_EQ(row.last_error, "repaired: SENT without its booking");
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
