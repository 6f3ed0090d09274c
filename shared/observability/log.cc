#include "shared/observability/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace outbox {
namespace {

LogLevel LevelFromEnv() {
  const char* env = std::getenv("OUTBOX_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kInfo;
  std::string v = absl::AsciiStrToLower(env);
  if (v == "debug") return LogLevel::kDebug;
  if (v == "warning" || v == "warn") return LogLevel::kWarning;
  if (v == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

std::atomic<int>& MinLevel() {
  static std::atomic<int> level{static_cast<int>(LevelFromEnv())};
  return level;
}

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
  }
  return "info";
}

// Values with spaces, quotes or '=' are quoted so lines stay machine-parsable.
std::string Quote(const std::string& value) {
  bool plain = !value.empty();
  for (char c : value) {
    if (c == ' ' || c == '"' || c == '=' || c == '\n' || c == '\t') plain = false;
  }
  if (plain) return value;
  std::string out = "\"";
  for (char c : value) {
    if (c == '"' || c == '\\') out += '\\';
    out += (c == '\n') ? ' ' : c;
  }
  out += '"';
  return out;
}

// The adopter's sink; null: stderr. Read on every line, replaced rarely.
std::shared_ptr<const LogSink>& SinkSlot() {
  static std::shared_ptr<const LogSink> sink;
  return sink;
}

}  // namespace

void SetLogSink(LogSink sink) {
  std::shared_ptr<const LogSink> next;
  if (sink) next = std::make_shared<const LogSink>(std::move(sink));
  std::atomic_store(&SinkSlot(), std::move(next));
}

void SetMinLogLevel(LogLevel level) {
  MinLevel().store(static_cast<int>(level));
}

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= MinLevel().load(std::memory_order_relaxed);
}

void Log(LogLevel level, absl::string_view event, std::initializer_list<LogField> fields) {
  if (!LogEnabled(level)) return;
  const absl::Time now = absl::Now();
  std::string line = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", now, absl::UTCTimeZone());
  absl::StrAppend(&line, " ", LevelName(level), " ", event);
  for (const auto& [key, value] : fields) absl::StrAppend(&line, " ", key, "=", Quote(value));
  line += '\n';
  if (std::shared_ptr<const LogSink> sink = std::atomic_load(&SinkSlot())) {
    (*sink)(LogRecord{level, now, event, fields, line});
    return;
  }
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace outbox
