#pragma once

// Identifiers are injected so tests can predict them.
#include <cstdint>
#include <string>

#include "shared/base/internal/mutex.h"

namespace outbox {

class IdGenerator {
 public:
  virtual ~IdGenerator() = default;
  virtual std::string NewId() = 0;  // globally unique, no prefix
};

// Random (version 4) UUIDs from a per-thread generator seeded by the OS.
class UuidGenerator final : public IdGenerator {
 public:
  std::string NewId() override;
};

// Time-ordered (version 7, RFC 9562) UUIDs: 48 bits of Unix milliseconds, a
// 12-bit counter (method 1 of the RFC's section 6.2: started at a random value
// below 2048 each millisecond), then 62 random bits. Each generator's ids
// increase strictly, also as strings. For keys of rows the services insert:
// a unique index on random ids takes each new id on a random leaf page, so
// a group commit of 35 rows wrote ~35 pages per such index; ids that
// increase land on the last page or two.
class TimeOrderedUuidGenerator final : public IdGenerator {
 public:
  std::string NewId() override ABSL_LOCKS_EXCLUDED(mu_);

  // The id for Unix time `unix_ms` after the previous one (tests).
  std::string NewIdAt(uint64_t unix_ms) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  Mutex mu_;
  uint64_t last_ms_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t counter_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace outbox
