#include "shared/outbox/reply_format.h"

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
  return std::vector<Acknowledgement>{ack};
}

}  // namespace outbox
