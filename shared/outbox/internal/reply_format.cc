#include "shared/outbox/internal/reply_format.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace outbox {

absl::StatusOr<std::vector<Acknowledgement>> DecodeDefaultReply(const Delivery& reply) {
  if (reply.type != kReplyType) {
    return absl::InvalidArgumentError(
        absl::StrCat("reply: type '", reply.type, "', not ", kReplyType));
  }
  std::vector<std::string> lines = absl::StrSplit(reply.body, absl::MaxSplits('\n', 3));
  if (lines.size() != 4 || lines[0].empty()) {
    return absl::InvalidArgumentError("reply: not four lines starting with a message id");
  }
  Acknowledgement ack;
  ack.message_id = lines[0];
  ack.biz_key = lines[2];
  if (lines[1] == "duplicate") {
    ack.duplicate = true;
  } else if (lines[1] == "rejected") {
    ack.rejected_reason = lines[3].empty() ? "rejected" : lines[3];
  } else if (lines[1] != "applied") {
    return absl::InvalidArgumentError(absl::StrCat("reply: unknown outcome '", lines[1], "'"));
  }
  // "<id>.reply.<unix ms>": when the consumer answered ("<id>.reply": not said).
  absl::string_view id = reply.message_id;
  int64_t answered_at = 0;
  if (absl::ConsumePrefix(&id, absl::StrCat(ack.message_id, ".reply.")) &&
      absl::SimpleAtoi(id, &answered_at) && answered_at > 0) {
    ack.answered_at = answered_at;
  }
  return std::vector<Acknowledgement>{ack};
}

}  // namespace outbox
