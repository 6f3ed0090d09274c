#include "shared/base/internal/ids.h"

#include <chrono>
#include <cstdio>
#include <random>

namespace outbox {

namespace {

std::mt19937_64& ThreadRng() {
  thread_local std::mt19937_64 rng{std::random_device{}() ^
                                   (static_cast<uint64_t>(std::random_device{}()) << 32)};
  return rng;
}

std::string Format(uint64_t hi, uint64_t lo) {
  char buf[37];
  std::snprintf(buf, sizeof(buf), "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xffff), static_cast<unsigned>(hi & 0xffff),
                static_cast<unsigned>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xffffffffffffULL));
  return buf;
}

constexpr uint64_t kVariant = 0x8000000000000000ULL;  // RFC 4122/9562 variant bits 10
constexpr uint64_t kRandomLow = 0x3fffffffffffffffULL;

}  // namespace

std::string UuidGenerator::NewId() {
  uint64_t hi = ThreadRng()();
  uint64_t lo = ThreadRng()();
  hi = (hi & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
  lo = (lo & kRandomLow) | kVariant;
  return Format(hi, lo);
}

std::string TimeOrderedUuidGenerator::NewId() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return NewIdAt(
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(now).count()));
}

std::string TimeOrderedUuidGenerator::NewIdAt(uint64_t unix_ms) {
  uint64_t ms;
  uint32_t counter;
  {
    MutexLock lock(&mu_);
    if (unix_ms > last_ms_) {
      last_ms_ = unix_ms;
      counter_ = static_cast<uint32_t>(ThreadRng()() & 0x7ff);  // room for 2,048 more
    } else if (++counter_ > 0xfff) {
      // 4,096 in one millisecond, or the clock went back: borrow the next
      // millisecond rather than repeat or go back (RFC 9562, 6.2).
      ++last_ms_;
      counter_ = 0;
    }
    ms = last_ms_;
    counter = counter_;
  }
  const uint64_t hi = ((ms & 0xffffffffffffULL) << 16) | 0x7000ULL | counter;  // version 7
  const uint64_t lo = (ThreadRng()() & kRandomLow) | kVariant;
  return Format(hi, lo);
}

}  // namespace outbox
