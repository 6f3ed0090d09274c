#pragma once

// Small files a process reads at start: a PEM file, or a secret kept in a
// file of its own (a password, a token) so that it never shows on a command
// line. Errors name the flag (or setting) that gave the path; a secret never
// appears in an error or a warning.
#include <string>

#include "absl/status/statusor.h"

namespace outbox {

// The whole of a small file (a PEM file or a token). INVALID_ARGUMENT naming
// `flag` and the path when it cannot be read.
absl::StatusOr<std::string> ReadSmallFile(const std::string& path, const std::string& flag);

// A token file's contents without surrounding whitespace. INVALID_ARGUMENT
// naming `flag` when it is unreadable or empty. `warning` (may be null)
// receives a sentence when other users may read the file; the caller decides
// how to report it.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& flag,
                                          std::string* warning);

}  // namespace outbox
