#pragma once

// One line per event: "ts level event key=value ...", written to stderr,
// or handed to a sink of the adopter's (SetLogSink).
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include "absl/strings/string_view.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace outbox {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

using LogField = std::pair<absl::string_view, std::string>;

void Log(LogLevel level, absl::string_view event, std::initializer_list<LogField> fields = {});

// Lines below this level are dropped (default kInfo; OUTBOX_LOG_LEVEL=debug|info|warning|error).
void SetMinLogLevel(LogLevel level);
// Whether a line at `level` would be written: callers on a hot path check it
// before building the fields of a per-message line.
bool LogEnabled(LogLevel level);

// One event as a sink receives it: its parts, for a structured logger, and
// the line the library would write.
struct LogRecord {
  LogLevel level;
  absl::Time time;
  absl::string_view event;
  std::initializer_list<LogField> fields;
  absl::string_view line;  // "ts level event key=value ...\n"
};
// Where the library's events go, for the whole process: each event at or
// above the minimum level (SetMinLogLevel) is passed to the sink instead of
// stderr. The sink runs on the thread that logs, from several threads at
// once, so it must be thread-safe; it must not call outbox::Log itself. An
// empty sink writes to stderr again. Set it before starting any worker.
using LogSink = std::function<void(const LogRecord&)>;
void SetLogSink(LogSink sink);

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
