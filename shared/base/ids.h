#pragma once

// Identifiers are injected so tests can predict them.
#include <cstdint>
#include <string>


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

}  // namespace outbox
