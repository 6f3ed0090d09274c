#pragma once

// The outbox state machine as plain functions over a row. Adapters load a
// row, apply one of these, and store what changed; nothing here knows about
// SQL or brokers, so every transition is unit-tested on its own.
//
//   (commit)  --> SENDING, attempt 1 counted (the fast-path publish)
//   SENDING   --due, budget left-->  SENDING, attempts+1, next_retry_at pushed
//   SENDING   --due, budget spent--> FAILED (alert)
//   SENDING   --ack-->               SENT
//   FAILED    --re-drive-->          SENDING, attempts 0, due now
//   any       --publish failed-->    same status, last_error noted (SENDING only)
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "shared/outbox/message.h"
#include "shared/outbox/retry_policy.h"

namespace outbox {

// What the writer of a row decides; the rest is filled in by NewOutboxMessage.
struct MessageSpec {
  std::string message_id;
  std::string biz_type;
  std::string biz_key;
  std::string routing_key;
  std::string message_type;
  std::string reply_to;
  std::string payload;
};

// A new SENDING row. The publish right after the commit is attempt 1, so the
// row is due for recovery only after policy.DelayAfter(1); the attempt budget
// is stored in the row and read from there when the row is retried.
OutboxMessage NewOutboxMessage(MessageSpec spec, int64_t now_ms, const RetryPolicy& policy);

enum class DueAction {
  kNotDue,     // not SENDING, or next_retry_at still ahead: unchanged
  kRepublish,  // attempts+1, last_attempt_at now, next_retry_at now + backoff
  kExhausted,  // the row already had max_attempts publishes: now FAILED
};
// Recovery found the row due at `now_ms`.
DueAction OnDue(OutboxMessage& row, int64_t now_ms, const RetryPolicy& policy);

enum class AckEffect {
  kClosed,       // SENDING -> SENT
  kAlreadySent,  // duplicate acknowledgement: nothing changes
  kIgnored,      // FAILED: left for the operator's re-drive
};
// The consumer acknowledged the message: its effect is booked.
AckEffect OnAck(OutboxMessage& row, int64_t now_ms);

// A publish was not confirmed: note why on a SENDING row (true when noted).
// The attempt was already counted when the publish started.
bool OnPublishFailure(OutboxMessage& row, const std::string& error, int64_t now_ms);

// An operator re-drives a FAILED row: SENDING, a fresh budget, due now.
// FAILED_PRECONDITION for any other status.
absl::Status OnRedrive(OutboxMessage& row, int64_t now_ms);

}  // namespace outbox
