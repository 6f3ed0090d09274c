#pragma once

// How often and how long a message is retried. One object, read by the
// service that writes outbox rows (attempt 1 and the budget stored in each
// row) and by the one that re-publishes them (the backoff of later attempts).
#include "absl/status/status.h"
#include "absl/time/time.h"

namespace outbox {

struct RetryPolicy {
  absl::Duration base_delay = absl::Seconds(5);  // linear unit: wait after attempt n = base * n
  absl::Duration max_delay = absl::Minutes(5);   // cap of that wait
  int max_attempts = 10;                         // publishes before a row becomes FAILED

  // The wait after attempt `attempt` (1-based): base * attempt, capped.
  absl::Duration DelayAfter(int attempt) const;
  // INVALID_ARGUMENT naming the bad setting.
  absl::Status Validate() const;
};

}  // namespace outbox
