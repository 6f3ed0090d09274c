#pragma once

// A clock that moves only when the test says so.
#include <atomic>
#include <cstdint>

#include "shared/base/clock.h"

namespace outbox::testing {

class ManualClock final : public Clock {
 public:
  explicit ManualClock(int64_t start_millis = 1'700'000'000'000) : millis_(start_millis) {}
  absl::Time Now() const override { return absl::FromUnixMillis(millis_.load()); }
  void Advance(absl::Duration d) { millis_ += absl::ToInt64Milliseconds(d); }
  void SetMillis(int64_t millis) { millis_ = millis; }

 private:
  std::atomic<int64_t> millis_;
};

}  // namespace outbox::testing
