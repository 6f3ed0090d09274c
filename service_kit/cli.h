#pragma once

// Command-line conventions shared by the binaries:
//   --help (or -h, --helpfull)  "usage: <program> ..." on the first line, the
//                               description, the flags; exit 0
//   --version                   "<program> <version> (commit <commit>, <build type>
//                               build)"; exit 0
//   a usage error               one line naming it, then the usage line; exit 2
// The version is the CMake project's VERSION, the commit the one the sources
// were built from (none outside a git checkout) and the build type
// CMAKE_BUILD_TYPE, passed in as compile definitions.
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace outbox {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// "payment_service 0.3.0 (commit 0123456789ab, RelWithDebInfo build)"; without
// the commit when built outside a git checkout.
std::string VersionLine(absl::string_view program);

// "usage: <program> <synopsis>".
std::string UsageLine(absl::string_view program, absl::string_view synopsis);

// "scheme://user:***@host" (and "?password=***", libpq's query form) for a
// value carrying a password, so --help never prints one that came from the
// environment.
std::string RedactUserinfo(absl::string_view value);

// For the service binaries, whose flags are Abseil flags defined in main.cc
// and *_flags.cc, each defaulting from an environment variable. Handles
// --help and --version, refuses unknown flags, values that do not parse and
// positional arguments (one line on stderr, exit 2), and otherwise sets the
// flags and returns nullopt: the program goes on. Abseil's own parser is not
// used because it exits 1 for --help and for bad flags and prints the
// program name twice.
std::optional<int> ParseServiceCommandLine(int argc, char** argv, absl::string_view program,
                                           absl::string_view description);

}  // namespace outbox
