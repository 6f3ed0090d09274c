#pragma once

// The recovery lease: one active recovery instance at a time. A standby
// only reads the lease (no write lock) and waits for it to run out; the
// holder renews it every third of its time to live, and gives it up when it
// stops or when its rounds keep failing, so another instance can try.
#include <atomic>
#include <string>

#include "absl/time/time.h"
#include "shared/base/clock.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/repository.h"

namespace outbox {

class LeaseKeeper {
 public:
  LeaseKeeper(RecoveryRepository& outbox, MetricsRegistry& metrics, std::string instance_id,
              absl::Duration ttl);

  // What Keep() found: held, or how to wait before asking again.
  struct Turn {
    bool held = false;
    // Another instance holds it: wait this long (until it runs out, at most
    // a third of the ttl), keeping the broker connection alive meanwhile.
    absl::Duration standby = absl::ZeroDuration();
    // The store failed: sleep this long.
    absl::Duration retry = absl::ZeroDuration();
  };
  // Takes the lease, or renews it when a third of its ttl has passed.
  Turn Keep(absl::Time now);

  // The store's fence refused a write: another instance holds it now.
  void Lost();
  // Gives the lease up after `failures` failed rounds in a row.
  void Yield(int failures, int64_t now_ms);
  // Gives the lease up (on stop), if held.
  void Release(int64_t now_ms);

  bool held() const { return held_.load(); }
  const std::string& instance_id() const { return instance_id_; }
  int64_t yields() const { return yields_.value(); }

 private:
  void ReleaseNow(int64_t now_ms);

  RecoveryRepository& outbox_;
  const std::string instance_id_;
  const absl::Duration ttl_;
  Counter& yields_;
  Counter& release_failures_;
  std::atomic<bool> held_{false};  // read from any thread (ops API, metrics)
  absl::Time renewed_ = absl::InfinitePast();
};

}  // namespace outbox
