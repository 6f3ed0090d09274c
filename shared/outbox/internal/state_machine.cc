#include "shared/outbox/internal/state_machine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "shared/outbox/internal/failure.h"

namespace outbox {

namespace {

void Fail(OutboxMessage& row, const char* kind, int64_t now_ms) {
  row.status = OutboxStatus::kFailed;
  row.failure_kind = kind;
  row.failure_group = FailureGroupOf(row.topic, kind, row.last_error);
  row.acknowledged_by.clear();
  row.updated_at = now_ms;
}

void ClearFailure(OutboxMessage& row) {
  row.failure_kind.clear();
  row.failure_group.clear();
  row.acknowledged_by.clear();
}

// FAILED_PRECONDITION unless the row is in `status`: "message 'm' is SENT;
// only FAILED messages can <what>".
absl::Status Require(const OutboxMessage& row, OutboxStatus status, absl::string_view what) {
  if (row.status == status) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("message '", row.message_id, "' is ",
                                                    StatusName(row.status), "; only ",
                                                    StatusName(status), " messages can ", what));
}

// SENDING again with a fresh budget, due now.
void Restart(OutboxMessage& row, int64_t now_ms) {
  row.status = OutboxStatus::kSending;
  row.attempts = 0;
  row.next_retry_at = now_ms;
  row.updated_at = now_ms;
  row.restarted_at = now_ms;
  ClearFailure(row);
}

}  // namespace

OutboxMessage NewOutboxMessage(MessageSpec spec, int64_t now_ms, const RetryPolicy& defaults) {
  const RetryPolicy policy = defaults.ForTopic(spec.topic);
  OutboxMessage row;
  row.message_id = std::move(spec.message_id);
  row.biz_type = std::move(spec.biz_type);
  row.biz_key = std::move(spec.biz_key);
  row.topic = std::move(spec.topic);
  row.message_type = std::move(spec.message_type);
  row.reply_to = std::move(spec.reply_to);
  row.payload = std::move(spec.payload);
  row.traceparent = std::move(spec.traceparent);
  row.status = OutboxStatus::kSending;
  row.attempts = 1;
  row.max_attempts = policy.max_attempts;
  row.last_attempt_at = now_ms;
  row.next_retry_at = now_ms + absl::ToInt64Milliseconds(policy.DelayAfter(1));
  row.created_at = now_ms;
  row.updated_at = now_ms;
  return row;
}

DueAction OnDue(OutboxMessage& row, int64_t now_ms, const RetryPolicy& defaults) {
  if (row.status != OutboxStatus::kSending || row.next_retry_at > now_ms) return DueAction::kNotDue;
  const RetryPolicy policy = defaults.ForTopic(row.topic);
  if (defaults.HasTopic(row.topic)) row.max_attempts = policy.max_attempts;
  row.updated_at = now_ms;
  const int64_t started = std::max(row.created_at, row.restarted_at);
  if (policy.max_age > absl::ZeroDuration() &&
      now_ms - started > absl::ToInt64Milliseconds(policy.max_age)) {
    row.last_error =
        absl::StrCat("older than the max age of ", absl::FormatDuration(policy.max_age), " after ",
                     row.attempts, " attempts");
    Fail(row, kFailureExpired, now_ms);
    return DueAction::kExhausted;
  }
  if (row.attempts >= row.max_attempts) {
    if (row.last_error.empty()) {  // every publish was confirmed: nobody answered
      row.last_error = absl::StrCat("no acknowledgement after ", row.attempts, " attempts");
    }
    Fail(row, kFailureExhausted, now_ms);
    return DueAction::kExhausted;
  }
  row.attempts += 1;
  row.last_attempt_at = now_ms;
  row.last_error.clear();  // the last publish's error only: this one's, if it fails
  row.next_retry_at = now_ms + absl::ToInt64Milliseconds(policy.DelayAfter(row.attempts));
  return DueAction::kRepublish;
}

bool OnHold(OutboxMessage& row, int64_t now_ms, const RetryPolicy& defaults) {
  if (row.status != OutboxStatus::kSending || row.next_retry_at > now_ms) return false;
  // Its last publish failed: no copy of it waits in the queue for the
  // consumers to take, so pushing it back would only delay its delivery.
  if (!row.last_error.empty()) return false;
  const RetryPolicy policy = defaults.ForTopic(row.topic);
  row.next_retry_at =
      now_ms + absl::ToInt64Milliseconds(policy.DelayAfter(std::max(row.attempts, 1)));
  row.updated_at = now_ms;
  return true;
}

AckEffect OnAck(OutboxMessage& row, int64_t now_ms) {
  if (row.status == OutboxStatus::kSent) return AckEffect::kAlreadySent;
  const bool late = row.status == OutboxStatus::kFailed;
  row.status = OutboxStatus::kSent;
  row.sent_at = now_ms;
  row.updated_at = now_ms;
  ClearFailure(row);
  if (late) return AckEffect::kLateClosed;  // last_error tells why it had failed
  row.last_error.clear();
  return AckEffect::kClosed;
}

bool OnPublishFailure(OutboxMessage& row, const std::string& error, int64_t now_ms) {
  if (row.status != OutboxStatus::kSending) return false;
  row.last_error = error;
  row.updated_at = now_ms;
  return true;
}

bool OnReject(OutboxMessage& row, const std::string& reason, int64_t now_ms, int64_t answered_at) {
  if (row.status == OutboxStatus::kSent) return false;
  // An answer to a copy sent before the restart: the restarted row waits
  // for the consumer's answer to its own.
  if (answered_at != 0 && answered_at < row.restarted_at) return false;
  if (row.status == OutboxStatus::kFailed && row.failure_kind == kFailureRejected &&
      row.last_error == reason) {
    return false;  // the same answer again (a copy's reply)
  }
  row.last_error = reason;
  Fail(row, kFailureRejected, now_ms);
  return true;
}

absl::Status OnAcknowledgeFailure(OutboxMessage& row, const std::string& by, int64_t now_ms) {
  if (absl::Status s = Require(row, OutboxStatus::kFailed, "be acknowledged"); !s.ok()) return s;
  row.acknowledged_by = by.empty() ? "operator" : by;
  row.updated_at = now_ms;
  return absl::OkStatus();
}

absl::Status OnRedrive(OutboxMessage& row, int64_t now_ms) {
  if (absl::Status s = Require(row, OutboxStatus::kFailed, "be re-driven"); !s.ok()) return s;
  Restart(row, now_ms);
  row.last_error.clear();
  return absl::OkStatus();
}

absl::Status OnResend(OutboxMessage& row, const std::string& reason, int64_t now_ms) {
  if (absl::Status s = Require(row, OutboxStatus::kSent, "be sent again"); !s.ok()) return s;
  Restart(row, now_ms);
  row.sent_at = 0;
  row.last_error = reason;
  return absl::OkStatus();
}

}  // namespace outbox
