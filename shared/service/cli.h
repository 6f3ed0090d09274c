#pragma once

// Command-line conventions shared by the binaries: --help lists the flags
// defined in the binary's main.cc and the shared service_flags.cc, each with the environment variable that
// sets its default.
#include <string>

namespace outbox {

void InitCommandLine(const std::string& usage);

}  // namespace outbox
