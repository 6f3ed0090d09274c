#pragma once

// Retention: SENT rows acknowledged longer ago than the retention move to
// the archive, in bounded batches, so the live outbox stays small.
#include <cstdint>
#include <functional>

#include "absl/time/time.h"
#include "shared/base/clock.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/repository.h"

namespace outbox {

class Archiver {
 public:
  // `stopping` cuts a long pass short.
  Archiver(
      RecoveryRepository& outbox, const Clock& clock, MetricsRegistry& metrics,
      absl::Duration retention, int batch, std::function<bool()> stopping = [] { return false; });

  // One pass: up to a bounded number of batches, until one comes back short
  // or fails (logged). Returns how many rows moved.
  int64_t Run();

  int64_t archived() const { return archived_.value(); }

 private:
  RecoveryRepository& outbox_;
  const Clock& clock_;
  const absl::Duration retention_;
  const int batch_;
  const std::function<bool()> stopping_;
  Counter& archived_;
};

}  // namespace outbox
