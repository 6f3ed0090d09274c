#pragma once

#include <algorithm>

#include "absl/time/time.h"

namespace outbox {

// Linear backoff: the wait after attempt n is base * n, capped at max.
struct LinearBackoff {
  absl::Duration base = absl::Seconds(5);
  absl::Duration max = absl::Minutes(5);

  absl::Duration After(int attempt) const {
    if (attempt < 1) attempt = 1;
    return std::min(base * attempt, max);
  }
};

}  // namespace outbox
