#include "shared/observability/internal/alert_group.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"

namespace outbox {

AlertGroup::AlertGroup(AlertSink& sink, const Clock& clock, absl::Duration resend_every)
    : sink_(sink), clock_(clock), resend_every_(resend_every) {}

std::string AlertGroup::Key(const Alert& alert) {
  std::string key = alert.name;
  for (const auto& [k, v] : alert.labels) absl::StrAppend(&key, "\x1f", k, "=", v);
  return key;
}

void AlertGroup::Stamp(Alert& alert, absl::Time now) const {
  alert.ends_at = now + 4 * resend_every_;
}

void AlertGroup::Add(Alert alert) {
  const absl::Time now = clock_.Now();
  const std::string key = Key(alert);
  auto it = active_.find(key);
  if (it != active_.end()) {
    // Newer annotations (a depth, a count) replace the old ones; the start stays.
    alert.starts_at = it->second.alert.starts_at;
    it->second.alert = std::move(alert);
    if (now - it->second.last_sent >= resend_every_) {
      Stamp(it->second.alert, now);
      sink_.Refresh(it->second.alert);
      it->second.last_sent = now;
    }
    return;
  }
  alert.starts_at = now;
  Stamp(alert, now);
  sink_.Raise(alert);
  active_.emplace(key, Entry{std::move(alert), now});
}

size_t AlertGroup::Forget() {
  const size_t dropped = active_.size();
  active_.clear();
  return dropped;
}

void AlertGroup::Update(std::vector<Alert> current, bool complete) {
  std::set<std::string> keep;
  for (Alert& alert : current) {
    keep.insert(Key(alert));
    Add(std::move(alert));
  }
  if (!complete) return;
  for (auto it = active_.begin(); it != active_.end();) {
    if (keep.count(it->first)) {
      ++it;
      continue;
    }
    Alert gone = std::move(it->second.alert);
    gone.ends_at = clock_.Now();
    sink_.Resolve(std::move(gone));
    it = active_.erase(it);
  }
}

}  // namespace outbox
