#pragma once

// How often and how long a message is retried. One object, read by the
// service that writes outbox rows (attempt 1 and the budget stored in each
// row) and by the one that re-publishes them (the backoff of later attempts).
// A topic may have a policy of its own (`topics`); the rest use the default.
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace outbox {

// One topic's settings; each replaces the default's.
struct TopicRetry {
  absl::Duration base_delay = absl::Seconds(5);
  int max_attempts = 10;
  absl::Duration max_age = absl::ZeroDuration();  // 0 = no limit
};

struct RetryPolicy {
  absl::Duration base_delay = absl::Seconds(5);  // linear unit: wait after attempt n = base * n
  absl::Duration max_delay = absl::Minutes(5);   // cap of that wait
  int max_attempts = 10;                         // publishes before a row becomes FAILED
  // A SENDING row older than this is FAILED (kind "expired") at its next
  // claim instead of being re-published. 0 = no limit.
  absl::Duration max_age = absl::ZeroDuration();
  // Policies by topic. At each claim, recovery applies the row's topic's
  // policy in force then: its delays and max age, and its max attempts in
  // place of the budget stored in the row. Rows of other topics keep the
  // budget stored when they were written.
  std::map<std::string, TopicRetry, std::less<>> topics;

  // The wait after attempt `attempt` (1-based): base * attempt, capped.
  absl::Duration DelayAfter(int attempt) const;
  // The policy for `topic` (this one, with its topic's settings if it has any).
  RetryPolicy ForTopic(absl::string_view topic) const;
  bool HasTopic(absl::string_view topic) const { return topics.find(topic) != topics.end(); }
  // INVALID_ARGUMENT naming the bad setting.
  absl::Status Validate() const;
};

// Parses per-topic policies, "TOPIC:KEY=VALUE,KEY=VALUE;TOPIC:..." with keys
// base_delay (a duration: 500ms, 5s, 2m), max_attempts and max_age, e.g.
// "invoices:base_delay=30s,max_attempts=20;orders:max_age=1h". A key not
// given takes the default's value. INVALID_ARGUMENT naming what is wrong.
absl::StatusOr<std::map<std::string, TopicRetry, std::less<>>> ParseTopicRetry(
    absl::string_view text, const RetryPolicy& defaults);

// The inverse, for `outboxctl policy` and logs: "" when there are none.
std::string FormatTopicRetry(const std::map<std::string, TopicRetry, std::less<>>& topics);

}  // namespace outbox
