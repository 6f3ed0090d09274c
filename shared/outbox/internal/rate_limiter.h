#pragma once

// Token bucket for re-publishing: at most `rate` messages per second on
// average, with bursts up to one second's worth.
#include <algorithm>
#include <cstdint>

#include "absl/time/time.h"
#include "shared/base/clock.h"

namespace outbox {

class RateLimiter {
 public:
  RateLimiter(double per_second, const Clock& clock)
      : rate_(per_second), tokens_(per_second), last_(clock.Now()), clock_(clock) {}

  // How many messages may go now (at most `want`); they are taken.
  int Take(int want) {
    Refill();
    const int n = std::min<int64_t>(want, static_cast<int64_t>(tokens_));
    tokens_ -= n;
    return n;
  }

  // How long until at least one token is available.
  absl::Duration UntilNext() {
    Refill();
    if (tokens_ >= 1) return absl::ZeroDuration();
    return absl::Seconds((1 - tokens_) / rate_);
  }

 private:
  void Refill() {
    const absl::Time now = clock_.Now();
    tokens_ = std::min(rate_, tokens_ + absl::ToDoubleSeconds(now - last_) * rate_);
    last_ = now;
  }

  const double rate_;
  double tokens_;
  absl::Time last_;
  const Clock& clock_;
};

}  // namespace outbox
