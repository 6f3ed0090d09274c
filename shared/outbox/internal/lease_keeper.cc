#include "shared/outbox/internal/lease_keeper.h"

#include <algorithm>
#include <utility>

#include "shared/observability/log.h"

namespace outbox {

LeaseKeeper::LeaseKeeper(RecoveryRepository& outbox, MetricsRegistry& metrics,
                         std::string instance_id, absl::Duration ttl)
    : outbox_(outbox),
      instance_id_(std::move(instance_id)),
      ttl_(ttl),
      yields_(metrics.AddCounter("outbox_lease_yields_total",
                                 "times the lease was given up after failed rounds")),
      release_failures_(StoreWriteFailures(metrics, "release_lease")) {
  metrics.AddGauge("outbox_lease_held", "1 when this instance is the active one", {},
                   [this] { return held_.load() ? 1 : 0; });
}

LeaseKeeper::Turn LeaseKeeper::Keep(absl::Time now) {
  const absl::Duration renew_every = ttl_ / 3;
  if (!held_) {
    // A standby sleeps until the holder's lease expires, so it takes over
    // right when the active instance's lease runs out.
    auto lease = outbox_.Lease();
    if (lease.ok() && !lease->holder.empty() && lease->holder != instance_id_) {
      const absl::Duration left = absl::FromUnixMillis(lease->expires_at) - now;
      if (left > absl::ZeroDuration()) {
        return {false, std::min(left + absl::Milliseconds(5), renew_every)};
      }
    }
  }
  if (held_ && now - renewed_ < renew_every) return {true};
  auto acquired = outbox_.TryAcquireLease(instance_id_, absl::ToUnixMillis(now),
                                          absl::ToInt64Milliseconds(ttl_));
  if (!acquired.ok()) {
    LogWarning("lease_error",
               {KV("instance", instance_id_), KV("error", acquired.status().message())});
    return {false, absl::ZeroDuration(), absl::Seconds(1)};
  }
  if (!*acquired) {
    Lost();
    return {false};  // the standby path above waits for the expiry
  }
  if (!held_) LogInfo("lease_acquired", {KV("instance", instance_id_)});
  held_ = true;
  renewed_ = now;
  return {true};
}

void LeaseKeeper::Lost() {
  if (held_) LogWarning("lease_lost", {KV("instance", instance_id_)});
  held_ = false;
}

void LeaseKeeper::Yield(int failures, int64_t now_ms) {
  // Let another instance, perhaps with a better path to the broker, try.
  LogWarning("lease_yielded", {KV("instance", instance_id_), KV("consecutive_failures", failures)});
  yields_.Add();
  ReleaseNow(now_ms);
}

void LeaseKeeper::Release(int64_t now_ms) {
  if (held_) ReleaseNow(now_ms);
}

void LeaseKeeper::ReleaseNow(int64_t now_ms) {
  held_ = false;
  const absl::Status s = outbox_.ReleaseLease(instance_id_, now_ms);
  if (s.ok()) return;
  // Not retried: the lease runs out by itself within its ttl, and a standby
  // takes over then.
  release_failures_.Add();
  LogWarning("lease_release_failed", {KV("instance", instance_id_), KV("error", s.message()),
                                      KV("expires_within", absl::FormatDuration(ttl_))});
}

}  // namespace outbox
