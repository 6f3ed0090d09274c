#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "shared/base/internal/ids.h"

namespace outbox::testing {

// Deterministic ids for tests: "<prefix>1", "<prefix>2", ...
class SequentialIds final : public IdGenerator {
 public:
  explicit SequentialIds(std::string prefix = "id-") : prefix_(std::move(prefix)) {}
  std::string NewId() override { return absl::StrCat(prefix_, ++next_); }

 private:
  std::string prefix_;
  std::atomic<int64_t> next_{0};
};

}  // namespace outbox::testing
