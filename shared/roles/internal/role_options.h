#pragma once

// What the roles (producer.h, consumer.h, recovery.h) share: the clock and
// metrics registry each defaults to.
#include "shared/base/clock.h"
#include "shared/observability/metrics.h"

namespace outbox::internal {

inline const Clock& ClockOr(const Clock* clock) {
  return clock != nullptr ? *clock : SystemClock::Get();
}

// The caller's registry, or `own` (made here) when there is none.
inline MetricsRegistry& MetricsOr(MetricsRegistry* metrics, std::unique_ptr<MetricsRegistry>& own) {
  if (metrics != nullptr) return *metrics;
  if (own == nullptr) own = std::make_unique<MetricsRegistry>();
  return *own;
}

}  // namespace outbox::internal
