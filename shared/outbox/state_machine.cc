#include "shared/outbox/state_machine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace outbox {

OutboxMessage NewOutboxMessage(MessageSpec spec, int64_t now_ms, const RetryPolicy& policy) {
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

DueAction OnDue(OutboxMessage& row, int64_t now_ms, const RetryPolicy& policy) {
  if (row.status != OutboxStatus::kSending || row.next_retry_at > now_ms) return DueAction::kNotDue;
  row.updated_at = now_ms;
  if (row.attempts >= row.max_attempts) {
    row.status = OutboxStatus::kFailed;
    if (row.last_error.empty()) {  // every publish was confirmed: nobody answered
      row.last_error = absl::StrCat("no acknowledgement after ", row.attempts, " attempts");
    }
    return DueAction::kExhausted;
  }
  row.attempts += 1;
  row.last_attempt_at = now_ms;
  row.next_retry_at = now_ms + absl::ToInt64Milliseconds(policy.DelayAfter(row.attempts));
  return DueAction::kRepublish;
}

bool OnHold(OutboxMessage& row, int64_t now_ms, const RetryPolicy& policy) {
  if (row.status != OutboxStatus::kSending || row.next_retry_at > now_ms) return false;
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

absl::Status OnRedrive(OutboxMessage& row, int64_t now_ms) {
  if (row.status != OutboxStatus::kFailed) {
    return absl::FailedPreconditionError(absl::StrCat("message '", row.message_id, "' is ",
                                                      StatusName(row.status),
                                                      "; only FAILED messages can be re-driven"));
  }
  row.status = OutboxStatus::kSending;
  row.attempts = 0;
  row.next_retry_at = now_ms;
  row.updated_at = now_ms;
  row.last_error.clear();
  return absl::OkStatus();
}

}  // namespace outbox
