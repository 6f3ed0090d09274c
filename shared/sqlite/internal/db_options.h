#pragma once

// How a service opens its SQLite files: durability, busy timeout, creation.
#include <string>

#include "absl/status/statusor.h"

namespace outbox {

enum class Durability { kFull, kNormal, kOff };

absl::StatusOr<Durability> ParseDurability(const std::string& name);  // "full" | "normal" | "off"

struct DbOptions {
  Durability durability = Durability::kFull;
  int busy_timeout_ms = 5000;
  // false: a missing file is an error (FAILED_PRECONDITION), never created.
  bool create_if_missing = true;
  // The SQLite VFS to open with; empty: SQLite's default. Tests trap a
  // connection's file calls with their own.
  std::string vfs;
};

}  // namespace outbox
