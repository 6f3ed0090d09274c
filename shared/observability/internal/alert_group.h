#pragma once

// Keeps one family of alerts in step with a condition that is checked again
// and again (rows FAILED, a consumer down, a dead-letter queue not empty):
// Update() raises what is new, resolves what is gone, and re-sends what stays
// every `resend_every` with an end time a few re-sends ahead (Prometheus's
// rule), so Alertmanager lets an alert expire by itself if its owner dies.
// Used from one thread.
#include <map>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "shared/base/clock.h"
#include "shared/observability/internal/alerts.h"

namespace outbox {

class AlertGroup {
 public:
  AlertGroup(AlertSink& sink, const Clock& clock, absl::Duration resend_every = absl::Minutes(1));

  // `current` is every alert of the family that should be active now. With
  // `complete` false (the caller saw only part of the condition) nothing is
  // resolved, only raised and refreshed.
  void Update(std::vector<Alert> current, bool complete = true);
  // One more active alert, raised now unless it already is.
  void Add(Alert alert);
  // Resolves every active alert of the family.
  void Clear() { Update({}); }
  // Drops every active alert without resolving it: another instance owns
  // the condition now and raises the same alert (same name and labels), so
  // a resolve from here would end its alert too. Ours runs out at ends_at
  // unless refreshed. Returns how many were dropped.
  size_t Forget();

  size_t active() const { return active_.size(); }

  // Identity of an alert as Alertmanager sees it: its name and labels.
  static std::string Key(const Alert& alert);

 private:
  struct Entry {
    Alert alert;
    absl::Time last_sent;
  };
  void Stamp(Alert& alert, absl::Time now) const;

  AlertSink& sink_;
  const Clock& clock_;
  const absl::Duration resend_every_;
  std::map<std::string, Entry> active_;
};

}  // namespace outbox
