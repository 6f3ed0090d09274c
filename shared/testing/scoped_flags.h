#pragma once

// Sets Abseil flags for one test and puts the old values back when it goes
// out of scope (absl::FlagSaver would too, with a log line per flag).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"

namespace outbox::testing {

class ScopedFlags {
 public:
  ~ScopedFlags() {
    // Newest first: a flag set twice gets the value it had before the first.
    std::string error;
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it)
      it->first->ParseFrom(it->second, &error);
  }
  void Set(const char* name, const char* value) {
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    ASSERT_NE(flag, nullptr) << name;
    saved_.emplace_back(flag, flag->CurrentValue());
    std::string error;
    ASSERT_TRUE(flag->ParseFrom(value, &error)) << name << ": " << error;
  }

 private:
  std::vector<std::pair<absl::CommandLineFlag*, std::string>> saved_;
};

}  // namespace outbox::testing
