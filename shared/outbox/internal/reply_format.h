#pragma once

// The library's reply: what a consumer answers each message with, unless
// its handler writes its own Replies, and what the producer's ack listener
// reads, unless it is handed another decoder (shared/roles/). One reply per
// message, type kReplyType, its body four lines:
//   <message id it answers>
//   applied | duplicate | rejected
//   <business key, or empty>
//   <reference of what was made, or the reject's reason (may span lines)>
// Its own message id is "<message id it answers>.reply.<unix ms>", when the
// consumer answered (Acknowledgement::answered_at; signed with the rest).
// Replies of earlier releases end in ".reply" and say no time; a producer of
// an earlier release reads the body only.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "shared/outbox/consumer_handler.h"
#include "shared/outbox/internal/ack_listener.h"
#include "shared/outbox/message.h"

namespace outbox {

inline constexpr char kReplyType[] = "outbox.Reply";

// Where a role answers a queue's messages unless told otherwise: "<queue>.replies".
inline std::string DefaultReplyQueue(const std::string& queue) {
  return queue + ".replies";
}

// The reply to `message_id` (published to `reply_to`) for what applying it
// did, answered at `answered_at_ms` (unix ms; 0: say no time). Header-only:
// a consumer's handler links no worker for it.
inline OutgoingMessage DefaultReply(const std::string& reply_to, const std::string& message_id,
                                    const std::string& biz_key, const Applied& applied,
                                    int64_t answered_at_ms = 0) {
  OutgoingMessage reply;
  reply.topic = reply_to;
  reply.message_id = answered_at_ms > 0 ? absl::StrCat(message_id, ".reply.", answered_at_ms)
                                        : message_id + ".reply";
  reply.type = kReplyType;
  const bool rejected = !applied.rejected_reason.empty();
  const char* outcome = rejected ? "rejected" : (applied.duplicate ? "duplicate" : "applied");
  reply.body = absl::StrCat(message_id, "\n", outcome, "\n", biz_key, "\n",
                            rejected ? applied.rejected_reason : applied.reference);
  return reply;
}

// What a DefaultReply acknowledges; INVALID_ARGUMENT (the ack listener
// dead-letters it) for any other type or a malformed body.
absl::StatusOr<std::vector<Acknowledgement>> DecodeDefaultReply(const Delivery& reply);

}  // namespace outbox
