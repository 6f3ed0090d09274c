#include "shared/outbox/retry_policy.h"

#include <algorithm>

namespace outbox {

absl::Duration RetryPolicy::DelayAfter(int attempt) const {
  return std::min(base_delay * std::max(attempt, 1), max_delay);
}

absl::Status RetryPolicy::Validate() const {
  if (base_delay <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("retry base delay must be positive");
  }
  if (max_delay < base_delay) {
    return absl::InvalidArgumentError("retry max delay must be at least the base delay");
  }
  if (max_attempts < 1) return absl::InvalidArgumentError("retry max attempts must be at least 1");
  return absl::OkStatus();
}

}  // namespace outbox
