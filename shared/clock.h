#pragma once

// Time is injected: services use SystemClock, tests a ManualClock.
#include <atomic>
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

class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_millis = 1'700'000'000'000) : millis_(start_millis) {}
  absl::Time Now() const override { return absl::FromUnixMillis(millis_.load()); }
  void Advance(absl::Duration d) { millis_ += absl::ToInt64Milliseconds(d); }
  void SetMillis(int64_t millis) { millis_ = millis; }

 private:
  std::atomic<int64_t> millis_;
};

}  // namespace outbox
