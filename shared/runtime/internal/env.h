#pragma once

// Flag defaults come from the environment so docker-compose and scripts can
// configure a service without a command line.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/time/time.h"

namespace outbox {

inline std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? std::string(v) : fallback;
}

inline int64_t EnvOrInt(const char* name, int64_t fallback) {
  int64_t out = 0;
  const char* v = std::getenv(name);
  return (v != nullptr && absl::SimpleAtoi(v, &out)) ? out : fallback;
}

inline double EnvOrDouble(const char* name, double fallback) {
  double out = 0;
  const char* v = std::getenv(name);
  return (v != nullptr && absl::SimpleAtod(v, &out)) ? out : fallback;
}

// Durations use Abseil's format ("500ms", "10s", "1h30m").
inline absl::Duration EnvOrDuration(const char* name, absl::Duration fallback) {
  absl::Duration out;
  const char* v = std::getenv(name);
  return (v != nullptr && absl::ParseDuration(v, &out)) ? out : fallback;
}

}  // namespace outbox
