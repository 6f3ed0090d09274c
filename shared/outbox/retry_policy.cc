#include "shared/outbox/retry_policy.h"

#include <algorithm>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace outbox {

absl::Duration RetryPolicy::DelayAfter(int attempt) const {
  return std::min(base_delay * std::max(attempt, 1), max_delay);
}

RetryPolicy RetryPolicy::ForTopic(absl::string_view topic) const {
  RetryPolicy p;
  p.base_delay = base_delay;
  p.max_delay = max_delay;
  p.max_attempts = max_attempts;
  p.max_age = max_age;
  auto it = topics.find(topic);
  if (it != topics.end()) {
    p.base_delay = it->second.base_delay;
    p.max_delay = std::max(max_delay, p.base_delay);
    p.max_attempts = it->second.max_attempts;
    p.max_age = it->second.max_age;
  }
  return p;
}

absl::Status RetryPolicy::Validate() const {
  if (base_delay <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("retry base delay must be positive");
  }
  if (max_delay < base_delay) {
    return absl::InvalidArgumentError("retry max delay must be at least the base delay");
  }
  if (max_attempts < 1) return absl::InvalidArgumentError("retry max attempts must be at least 1");
  if (max_age < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("retry max age must not be negative");
  }
  for (const auto& [topic, t] : topics) {
    if (topic.empty()) return absl::InvalidArgumentError("a topic's retry policy needs the topic");
    if (t.base_delay <= absl::ZeroDuration() || t.max_attempts < 1 ||
        t.max_age < absl::ZeroDuration()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "retry policy of topic '", topic,
          "': base_delay must be positive, max_attempts at least 1, max_age not negative"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, TopicRetry, std::less<>>> ParseTopicRetry(
    absl::string_view text, const RetryPolicy& defaults) {
  std::map<std::string, TopicRetry, std::less<>> topics;
  for (absl::string_view entry : absl::StrSplit(text, ';', absl::SkipWhitespace())) {
    entry = absl::StripAsciiWhitespace(entry);
    std::vector<absl::string_view> head = absl::StrSplit(entry, absl::MaxSplits(':', 1));
    const std::string topic(absl::StripAsciiWhitespace(head[0]));
    if (head.size() != 2 || topic.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("topic retry policy '", entry, "': want TOPIC:KEY=VALUE[,KEY=VALUE...]"));
    }
    if (topics.count(topic) > 0) {
      return absl::InvalidArgumentError(absl::StrCat("topic '", topic, "' given twice"));
    }
    TopicRetry t{defaults.base_delay, defaults.max_attempts, defaults.max_age};
    for (absl::string_view kv : absl::StrSplit(head[1], ',', absl::SkipWhitespace())) {
      std::vector<absl::string_view> p = absl::StrSplit(kv, absl::MaxSplits('=', 1));
      const absl::string_view key = absl::StripAsciiWhitespace(p[0]);
      const absl::string_view value = p.size() == 2 ? absl::StripAsciiWhitespace(p[1]) : "";
      bool ok = p.size() == 2;
      if (key == "base_delay") {
        ok = ok && absl::ParseDuration(value, &t.base_delay);
      } else if (key == "max_age") {
        ok = ok && absl::ParseDuration(value, &t.max_age);
      } else if (key == "max_attempts") {
        ok = ok && absl::SimpleAtoi(value, &t.max_attempts);
      } else {
        return absl::InvalidArgumentError(absl::StrCat("topic '", topic, "': unknown key '", key,
                                                       "' (base_delay, max_attempts or max_age)"));
      }
      if (!ok) {
        return absl::InvalidArgumentError(
            absl::StrCat("topic '", topic, "': bad value in '", kv, "'"));
      }
    }
    topics.emplace(topic, t);
  }
  RetryPolicy check = defaults;
  check.topics = topics;
  if (absl::Status s = check.Validate(); !s.ok()) return s;
  return topics;
}

std::string FormatTopicRetry(const std::map<std::string, TopicRetry, std::less<>>& topics) {
  std::vector<std::string> parts;
  for (const auto& [topic, t] : topics) {
    parts.push_back(absl::StrCat(topic, ":base_delay=", absl::FormatDuration(t.base_delay),
                                 ",max_attempts=", t.max_attempts,
                                 ",max_age=", absl::FormatDuration(t.max_age)));
  }
  return absl::StrJoin(parts, ";");
}

}  // namespace outbox
