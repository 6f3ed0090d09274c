#include "service_kit/grpc/proto_convert.h"

#include <google/protobuf/util/time_util.h>

#include "absl/status/status.h"

namespace outbox {

int OutboxStatusNumber(OutboxStatus status) {
  return static_cast<int>(status);
}

absl::StatusOr<std::optional<OutboxStatus>> OutboxStatusFromNumber(int number) {
  if (number == 0) return std::optional<OutboxStatus>();
  for (OutboxStatus s : kAllStatuses) {
    if (OutboxStatusNumber(s) == number) return std::optional<OutboxStatus>(s);
  }
  return absl::InvalidArgumentError("status is not a known outbox status");
}

void SetTimestamp(int64_t unix_ms, google::protobuf::Timestamp* out) {
  *out = google::protobuf::util::TimeUtil::MillisecondsToTimestamp(unix_ms);
}

}  // namespace outbox
