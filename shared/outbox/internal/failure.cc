#include "shared/outbox/internal/failure.h"

#include <cctype>
#include <cstdint>

#include "absl/strings/str_format.h"

namespace outbox {
namespace {

bool IsHexOrDash(char c) {
  return std::isxdigit(static_cast<unsigned char>(c)) || c == '-';
}
bool IsWordChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

}  // namespace

std::string FailurePattern(absl::string_view error) {
  std::string out;
  out.reserve(error.size());
  size_t i = 0;
  while (i < error.size()) {
    const char c = error[i];
    if (c == '\'' || c == '"') {  // quoted text: a value, not the error's shape
      const size_t close = error.find(c, i + 1);
      if (close != absl::string_view::npos) {
        out.append(1, c).append("*").append(1, c);
        i = close + 1;
        continue;
      }
    }
    const bool word_start = i == 0 || !IsWordChar(error[i - 1]);
    if (word_start &&
        IsHexOrDash(c)) {  // an id-like word: 8+ hex digits/dashes, digits and letters
      size_t j = i;
      bool digit = false;
      bool letter = false;
      while (j < error.size() && IsHexOrDash(error[j])) {
        const unsigned char d = static_cast<unsigned char>(error[j]);
        digit = digit || std::isdigit(d);
        letter = letter || std::isalpha(d);
        ++j;
      }
      if (j - i >= 8 && digit && letter && (j == error.size() || !IsWordChar(error[j]))) {
        out.append("*");
        i = j;
        continue;
      }
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      while (i < error.size() && std::isdigit(static_cast<unsigned char>(error[i]))) ++i;
      out.append("#");
      continue;
    }
    out.push_back(c);
    ++i;
  }
  return out;
}

std::string FailureGroupOf(absl::string_view topic, absl::string_view kind,
                           absl::string_view error) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a, 64 bit: stable across builds and hosts
  auto mix = [&h](absl::string_view part) {
    for (char c : part) {
      h ^= static_cast<unsigned char>(c);
      h *= 1099511628211ULL;
    }
    h ^= 0xff;  // separator: ("ab","c") and ("a","bc") differ
    h *= 1099511628211ULL;
  };
  mix(topic);
  mix(kind);
  mix(FailurePattern(error));
  return absl::StrFormat("%012x", h >> 16);
}

}  // namespace outbox
