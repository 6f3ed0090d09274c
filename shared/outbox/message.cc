#include "shared/outbox/message.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace outbox {

absl::string_view StatusName(OutboxStatus status) {
  switch (status) {
    case OutboxStatus::kSending: return "SENDING";
    case OutboxStatus::kSent: return "SENT";
    case OutboxStatus::kFailed: return "FAILED";
  }
  return "SENDING";
}

absl::StatusOr<OutboxStatus> ParseStatus(absl::string_view name) {
  for (OutboxStatus s : kAllStatuses) {
    if (StatusName(s) == name) return s;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown outbox status '", name, "'"));
}

OutgoingMessage ToOutgoing(const OutboxMessage& row) {
  return {row.topic,        row.message_id,  row.payload,      row.reply_to,
          row.message_type, row.traceparent, /*signature=*/"", row.biz_key};
}

OutgoingMessage Forward(const Delivery& d, const std::string& topic) {
  return {topic, d.message_id, d.body, d.reply_to, d.type, d.traceparent, d.signature, d.shard_key};
}

}  // namespace outbox
