#pragma once

// A worker whose store refuses a write (busy, locked, a full disk:
// StoreUnavailable, dead_letter.h) keeps the deliveries it could not
// record, unacked, and tries again after a pause that doubles from 200 ms up
// to `max` with each refusal in a row; a write that goes through starts the
// count again. The ack listener and the idempotent consumer back off this
// way. Not to be confused with re-publishing's hold (republish_hold.h), the
// lease kept (lease_keeper.h) or the group writer's backpressure (max_hold).
#include <algorithm>

#include "absl/time/time.h"
#include "shared/base/clock.h"

namespace outbox {

class StoreBackoff {
 public:
  StoreBackoff(const Clock& clock, absl::Duration max) : clock_(clock), max_(max) {}

  // One more refusal in a row: the pause until the next try.
  absl::Duration Refused() {
    absl::Duration pause = absl::Milliseconds(200);
    for (int i = 0; i < failures_ && pause < max_; ++i) pause *= 2;
    pause = std::min(pause, max_);
    ++failures_;
    retry_at_ = clock_.Now() + pause;
    return pause;
  }
  void Succeeded() { failures_ = 0; }

  int failures() const { return failures_; }  // refusals in a row
  bool Due() const { return clock_.Now() >= retry_at_; }
  // How long to wait on the connection now (keeping it alive and taking
  // what else arrives): until the next try, at most 200 ms.
  absl::Duration WaitNow() const {
    return std::clamp(retry_at_ - clock_.Now(), absl::ZeroDuration(), absl::Milliseconds(200));
  }

 private:
  const Clock& clock_;
  const absl::Duration max_;
  int failures_ = 0;
  absl::Time retry_at_;
};

}  // namespace outbox
