#include "shared/observability/internal/trace.h"

#include <cstdint>
#include <random>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace outbox {
namespace {

bool IsLowerHex(absl::string_view s, size_t size) {
  if (s.size() != size) return false;
  bool nonzero = false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    nonzero |= c != '0';
  }
  return nonzero;
}

std::string RandomHex(size_t digits) {
  thread_local std::mt19937_64 rng{std::random_device{}() ^
                                   (static_cast<uint64_t>(std::random_device{}()) << 32)};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(digits);
  while (out.size() < digits) {
    uint64_t bits = rng();
    for (int i = 0; i < 16 && out.size() < digits; ++i, bits >>= 4) out += kHex[bits & 0xf];
  }
  if (out.find_first_not_of('0') == std::string::npos) out.back() = '1';  // never all zero
  return out;
}

}  // namespace

std::string TraceContext::Traceparent() const {
  return absl::StrCat("00-", trace_id, "-", span_id, "-", flags);
}

std::optional<TraceContext> ParseTraceparent(absl::string_view value) {
  std::vector<absl::string_view> parts = absl::StrSplit(absl::StripAsciiWhitespace(value), '-');
  if (parts.size() < 4) return std::nullopt;
  const absl::string_view version = parts[0];
  if (version.size() != 2 || version == "ff" || !IsLowerHex(absl::StrCat(version, "1"), 3)) {
    return std::nullopt;
  }
  if (version == "00" && parts.size() != 4) return std::nullopt;
  if (!IsLowerHex(parts[1], 32) || !IsLowerHex(parts[2], 16)) return std::nullopt;
  if (parts[3].size() != 2 || !IsLowerHex(absl::StrCat(parts[3], "1"), 3)) return std::nullopt;
  return TraceContext{std::string(parts[1]), std::string(parts[2]), std::string(parts[3])};
}

TraceContext NewTrace() {
  return TraceContext{RandomHex(32), RandomHex(16), "01"};
}

TraceContext ChildSpan(const TraceContext& parent) {
  return TraceContext{parent.trace_id, RandomHex(16), parent.flags};
}

TraceContext ContinueOrStart(absl::string_view traceparent) {
  std::optional<TraceContext> parent = ParseTraceparent(traceparent);
  return parent.has_value() ? ChildSpan(*parent) : NewTrace();
}

std::string TraceIdOf(absl::string_view traceparent) {
  std::optional<TraceContext> t = ParseTraceparent(traceparent);
  return t.has_value() ? t->trace_id : std::string();
}

}  // namespace outbox
