#pragma once

// The outbox state machine as plain functions over a row. Adapters load a
// row, apply one of these, and store what changed; nothing here knows about
// SQL or brokers, so every transition is unit-tested on its own.
//
//   (commit)  --> SENDING, attempt 1 counted (the fast-path publish)
//   SENDING   --due, budget left-->  SENDING, attempts+1, next_retry_at pushed, last_error cleared
//   SENDING   --due, budget spent--> FAILED, kind exhausted (alert)
//   SENDING   --due, too old-------> FAILED, kind expired (alert)
//   SENDING   --rejected-->          FAILED, kind rejected (one alert per group); a reject
//                                    made before restarted_at changes nothing
//   SENDING   --hold ends, due-->    SENDING, next_retry_at pushed, attempts kept (unless its
//                                    last publish failed: no copy of it is queued)
//   SENDING   --ack-->               SENT
//   FAILED    --late ack-->          SENT (last_error kept; its alert resolves)
//   FAILED    --re-drive-->          SENDING, attempts 0, due now, restarted_at now
//   FAILED    --acknowledge-->       FAILED, acknowledged_by set (its alert stops)
//   SENT      --resend-->            SENDING, attempts 0, due now, restarted_at now (the
//                                    consumer lost its effect)
//   any       --publish failed-->    same status, last_error noted (SENDING only)
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "shared/outbox/message.h"
#include "shared/outbox/retry_policy.h"

namespace outbox {

// A new SENDING row. The publish right after the commit is attempt 1, so the
// row is due for recovery only after policy.DelayAfter(1); the attempt budget
// is stored in the row and read from there when the row is retried.
OutboxMessage NewOutboxMessage(MessageSpec spec, int64_t now_ms, const RetryPolicy& policy);

enum class DueAction {
  kNotDue,     // not SENDING, or next_retry_at still ahead: unchanged
  kRepublish,  // attempts+1, last_attempt_at now, next_retry_at now + backoff,
               // last_error cleared (it is the last publish's error)
  kExhausted,  // the row already had max_attempts publishes, or is older than the
               // policy's max age: now FAILED (last_error says why: the last
               // publish error, that nobody acknowledged, or its age)
};
// Recovery found the row due at `now_ms`. The row's topic's policy applies
// (RetryPolicy::ForTopic); a topic with a policy of its own also replaces
// the budget stored in the row. The max age counts from the row's creation
// or, when an operator or a repair restarted it since (OnRedrive, OnResend),
// from its restarted_at: a re-drive gets a whole budget, not an expiry at
// its first claim.
DueAction OnDue(OutboxMessage& row, int64_t now_ms, const RetryPolicy& policy);

// A hold ends (the queue had nobody consuming it, or was far behind) and
// the row is due: its copy is queued and being delivered now, so the row
// waits another backoff step without spending an attempt. Not a row whose
// last publish failed (last_error set): no copy of it is queued, so it goes
// now. True when the row changed.
bool OnHold(OutboxMessage& row, int64_t now_ms, const RetryPolicy& policy);

enum class AckEffect {
  kClosed,       // SENDING -> SENT
  kLateClosed,   // FAILED -> SENT: delivered after all; last_error kept
  kAlreadySent,  // duplicate acknowledgement: nothing changes
};
// The consumer acknowledged the message: its effect is booked, so the row is
// delivered whatever its state (a FAILED row too: saying otherwise would send
// an operator after a business change that is fine).
AckEffect OnAck(OutboxMessage& row, int64_t now_ms);

// A publish was not confirmed: note why on a SENDING row (true when noted).
// The attempt was already counted when the publish started.
bool OnPublishFailure(OutboxMessage& row, const std::string& error, int64_t now_ms);

// The consumer answered that it will never process the message (a
// business reject): a SENDING or FAILED row becomes FAILED with the reason
// and kind "rejected", at once, with no further publish. True when the row
// changed; a SENT row stays SENT (it was booked before). `answered_at` is
// when the consumer made the reject (unix ms, from its signed reply; 0: the
// reply does not say): one made before the row's restarted_at answers a
// copy sent before an operator's re-drive or a repair, and changes nothing,
// so a late or replayed reject never fails the restarted row.
bool OnReject(OutboxMessage& row, const std::string& reason, int64_t now_ms,
              int64_t answered_at = 0);

// An operator re-drives a FAILED row: SENDING, a fresh budget, due now,
// restarted_at now.
// FAILED_PRECONDITION for any other status.
absl::Status OnRedrive(OutboxMessage& row, int64_t now_ms);

// An operator has seen a FAILED row and leaves it FAILED: its alert stops.
// FAILED_PRECONDITION for any other status.
absl::Status OnAcknowledgeFailure(OutboxMessage& row, const std::string& by, int64_t now_ms);

// An operator's tool found that the consumer holds no effect of a SENT row
// (its record was lost after the acknowledgement, e.g. a restore of an older
// consumer database): SENDING, a fresh budget, due now, `reason` in
// last_error, restarted_at now, so recovery delivers it again and the
// consumer applies it once.
// FAILED_PRECONDITION for any other status.
absl::Status OnResend(OutboxMessage& row, const std::string& reason, int64_t now_ms);

}  // namespace outbox
