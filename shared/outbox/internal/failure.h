#pragma once

// Why a row is FAILED, and the group it fails with. Rows that fail the same
// way (the same topic, kind and error once ids and numbers are taken out)
// share a failure group, so an operator sees "3,012 rows: amount # over the
// limit #" once, and re-drives or acknowledges them together.
#include <string>

#include "absl/strings/string_view.h"

namespace outbox {

// failure_kind of a FAILED row.
inline constexpr char kFailureExhausted[] = "exhausted";  // every attempt spent
inline constexpr char kFailureRejected[] = "rejected";    // the consumer said no
inline constexpr char kFailureExpired[] = "expired";      // older than its topic's max age

// The error with what varies per message taken out: every run of digits
// becomes "#", every word of 8 or more hex digits and dashes with both
// digits and letters in it (ids, hashes, uuids) becomes "*", and quoted text
// becomes '*'.
std::string FailurePattern(absl::string_view error);

// The group's id: 12 hex digits of a hash of topic, kind and pattern.
std::string FailureGroupOf(absl::string_view topic, absl::string_view kind,
                           absl::string_view error);

}  // namespace outbox
