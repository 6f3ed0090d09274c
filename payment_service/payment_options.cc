#include "payment_service/payment_options.h"

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"

namespace outbox::payment {

absl::Status PaymentServiceOptions::Validate() const {
  if (publish_window < 1 || group_commit_max < 1 || prefetch < 1 || prefetch > 65535) {
    return absl::InvalidArgumentError(
        "--publish_window and --group_commit_max must be positive; --prefetch 1..65535");
  }
  if (max_unsent < 0 || max_hold_ms < 0 || max_hold_ms > 1000 || ack_linger_ms < 0 ||
      ack_linger_ms > 1000) {
    return absl::InvalidArgumentError(
        "--max_unsent must be >= 0; --max_hold_ms and --ack_linger_ms 0..1000");
  }
  return absl::OkStatus();
}

}  // namespace outbox::payment
