#pragma once

// Identifiers are injected so tests can predict them.
#include <atomic>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

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

// Deterministic ids for tests: "<prefix>1", "<prefix>2", ...
class SequentialIds final : public IdGenerator {
 public:
  explicit SequentialIds(std::string prefix = "id-") : prefix_(std::move(prefix)) {}
  std::string NewId() override { return absl::StrCat(prefix_, ++next_); }

 private:
  std::string prefix_;
  std::atomic<int64_t> next_{0};
};

}  // namespace outbox
