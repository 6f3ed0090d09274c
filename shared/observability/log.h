#pragma once

// One line per event: "ts level event key=value ...", written to stderr.
#include <initializer_list>
#include <string>
#include <utility>
#include "absl/strings/string_view.h"

#include "absl/strings/str_cat.h"

namespace outbox {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

using LogField = std::pair<absl::string_view, std::string>;

void Log(LogLevel level, absl::string_view event, std::initializer_list<LogField> fields = {});

// Lines below this level are dropped (default kInfo; OUTBOX_LOG_LEVEL=debug|info|warning|error).
void SetMinLogLevel(LogLevel level);
// Whether a line at `level` would be written: callers on a hot path check it
// before building the fields of a per-message line.
bool LogEnabled(LogLevel level);

template <typename T>
LogField KV(absl::string_view key, const T& value) {
  return {key, absl::StrCat(value)};
}

inline void LogDebug(absl::string_view event, std::initializer_list<LogField> fields = {}) {
  Log(LogLevel::kDebug, event, fields);
}
inline void LogInfo(absl::string_view event, std::initializer_list<LogField> fields = {}) {
  Log(LogLevel::kInfo, event, fields);
}
inline void LogWarning(absl::string_view event, std::initializer_list<LogField> fields = {}) {
  Log(LogLevel::kWarning, event, fields);
}
inline void LogError(absl::string_view event, std::initializer_list<LogField> fields = {}) {
  Log(LogLevel::kError, event, fields);
}

}  // namespace outbox
