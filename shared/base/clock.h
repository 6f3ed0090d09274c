#pragma once

// Time is injected: services use SystemClock, tests a ManualClock
// (shared/testing/manual_clock.h).
#include <cstdint>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace outbox {

class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  int64_t NowMillis() const { return absl::ToUnixMillis(Now()); }
};

class SystemClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  static const Clock& Get() {
    static const SystemClock clock;
    return clock;
  }
};

}  // namespace outbox
