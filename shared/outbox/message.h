#pragma once

// The outbox message: one row of the outbox table, written in the same local
// transaction as the business change it announces, and everything needed to
// put it on the wire later (topic, message type, reply_to) stored with it, so
// any process that reads the row can publish it the same way.
#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace outbox {

// SENDING until the consumer acknowledges; FAILED when the attempt budget is
// spent (an operator's re-drive or a late acknowledgement ends it).
enum class OutboxStatus { kSending = 1, kSent = 2, kFailed = 3 };

inline constexpr OutboxStatus kAllStatuses[] = {OutboxStatus::kSending, OutboxStatus::kSent,
                                                OutboxStatus::kFailed};

absl::string_view StatusName(OutboxStatus status);  // "SENDING", "SENT", "FAILED"
// INVALID_ARGUMENT for anything else.
absl::StatusOr<OutboxStatus> ParseStatus(absl::string_view name);

struct OutboxMessage {
  int64_t id = 0;  // row id: the paging cursor
  std::string message_id;
  std::string biz_type;  // biz_type + biz_key: the business idempotency key
  std::string biz_key;
  std::string topic;         // where it goes (the table's `topic` column)
  std::string message_type;  // e.g. "OrderPlaced"
  std::string reply_to;      // where the consumer's acknowledgement goes
  std::string traceparent;   // W3C trace context of the request that wrote it ("" if none)
  std::string payload;
  OutboxStatus status = OutboxStatus::kSending;
  int attempts = 0;
  int max_attempts = 0;
  int64_t next_retry_at = 0;    // unix ms
  int64_t last_attempt_at = 0;  // unix ms, 0 = never
  std::string last_error;
  int64_t created_at = 0;
  int64_t updated_at = 0;
  int64_t sent_at = 0;  // 0 = not acknowledged
  // Why a FAILED row failed (failure.h): kFailureExhausted, kFailureRejected
  // or kFailureExpired; "" while it has not failed.
  std::string failure_kind;
  // The failure group of a FAILED row (FailureGroupOf), "" otherwise.
  std::string failure_group;
  // Who acknowledged the FAILED row ("seen, leave it FAILED"): its alert
  // stops; "" = nobody.
  std::string acknowledged_by;
  // When an operator's re-drive or a repair last restarted the row (unix
  // ms), 0 = never: its max age counts from then (OnDue), and a reject the
  // consumer made before then changes nothing (OnReject).
  int64_t restarted_at = 0;
};

// The producer's outbox rows by status, archived rows not counted: "are my
// rows closed?" (CountRows and WaitUntilClosed of Producer and PgProducer).
struct OutboxRowCounts {
  int64_t sending = 0;
  int64_t sent = 0;
  int64_t failed = 0;
};

// What goes on the wire, whatever the broker.
struct OutgoingMessage {
  std::string topic;  // the AMQP adapter publishes it as the routing key
  std::string message_id;
  std::string body;
  std::string reply_to;
  std::string type;
  std::string traceparent;  // sent as the AMQP header "traceparent" when set
  std::string signature;    // "<key id>:<hmac>" (message_auth.h); "" = unsigned
  // The business key, sent as the AMQP header kShardKeyHeader when set: the
  // consistent-hash exchange of a sharded consumer hashes on it.
  std::string shard_key;
};

// The header the x-consistent-hash exchange of a sharded queue hashes on.
inline constexpr char kShardKeyHeader[] = "x-outbox-shard-key";

// A message received from a queue. The tag identifies it to the transport
// that delivered it (ack, reject, requeue).
// What the writer of a row decides; the rest is filled in by
// NewOutboxMessage. Empty fields take the producer's defaults: a
// time-ordered UUID as message_id, its queue as topic and reply queue.
struct MessageSpec {
  std::string message_id;
  std::string biz_type;
  std::string biz_key;
  std::string topic;
  std::string message_type;
  std::string reply_to;
  std::string payload;
  std::string traceparent;

  // The usual message: of `type` (its message_type, and its biz_type),
  // about the business key `key`, carrying `payload`.
  static MessageSpec Of(std::string type, std::string key, std::string payload) {
    MessageSpec spec;
    spec.biz_type = type;
    spec.message_type = std::move(type);
    spec.biz_key = std::move(key);
    spec.payload = std::move(payload);
    return spec;
  }
};

struct Delivery {
  uint64_t delivery_tag = 0;
  std::string message_id;
  std::string reply_to;
  std::string type;
  std::string traceparent;  // the "traceparent" header, if any
  std::string signature;    // the kSignatureHeader header, if any
  std::string shard_key;    // the kShardKeyHeader header, if any
  std::string body;
  bool redelivered = false;
};

// The one conversion from a stored row to the message that is published,
// first by the fast path and later by recovery.
OutgoingMessage ToOutgoing(const OutboxMessage& row);

// A received message sent on again unchanged to `topic` (a dead letter
// re-driven to its queue): headers and signature included, so re-driving
// never turns a forged message into a trusted one.
OutgoingMessage Forward(const Delivery& delivery, const std::string& topic);

}  // namespace outbox
