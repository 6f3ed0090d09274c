#include "shared/service/cli.h"

#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"

namespace outbox {

void InitCommandLine(const std::string& usage) {
  absl::FlagsUsageConfig config;
  auto in_main = [](absl::string_view file) {
    return absl::EndsWith(file, "main.cc") || absl::EndsWith(file, "_flags.cc");
  };
  config.contains_helpshort_flags = in_main;
  config.contains_help_flags = in_main;
  absl::SetFlagsUsageConfig(config);
  absl::SetProgramUsageMessage(usage);
}

}  // namespace outbox
