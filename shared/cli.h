#pragma once

// Command-line conventions shared by the binaries: --help lists the flags
// defined in the binary's main.cc, each with the environment variable that
// sets its default.
#include <string>

namespace outbox {

void InitCommandLine(const std::string& usage);

}  // namespace outbox
