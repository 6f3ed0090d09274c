#pragma once

// Conversions every gRPC edge here shares, so each is written once.
#include <cstdint>
#include <optional>

#include <google/protobuf/timestamp.pb.h>

#include "absl/status/statusor.h"
#include "shared/outbox/message.h"

namespace outbox {

// The outbox status on the wire: every proto here numbers it
// UNSPECIFIED = 0, SENDING = 1, SENT = 2, FAILED = 3 (payment.v1.OutboxStatus,
// ops.v1.MessageStatus).
int OutboxStatusNumber(OutboxStatus status);
template <typename ProtoEnum>
ProtoEnum OutboxStatusToProto(OutboxStatus status) {
  return static_cast<ProtoEnum>(OutboxStatusNumber(status));
}
// 0 (UNSPECIFIED) is nullopt; an unknown number is INVALID_ARGUMENT.
absl::StatusOr<std::optional<OutboxStatus>> OutboxStatusFromNumber(int number);

// Unix milliseconds as a protobuf Timestamp.
void SetTimestamp(int64_t unix_ms, google::protobuf::Timestamp* out);

}  // namespace outbox
