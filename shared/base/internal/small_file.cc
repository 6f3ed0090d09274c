#include "shared/base/internal/small_file.h"

#include <sys/stat.h>

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace outbox {

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot read '", path, "'"));
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": cannot read '", path, "'"));
  }
  return contents.str();
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path, const std::string& flag,
                                          std::string* warning) {
  auto contents = ReadSmallFile(path, flag);
  if (!contents.ok()) return contents.status();
  std::string token(absl::StripAsciiWhitespace(*contents));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": '", path, "' is empty"));
  }
  struct stat st = {};
  if (warning != nullptr && stat(path.c_str(), &st) == 0 && (st.st_mode & S_IROTH) != 0) {
    *warning = absl::StrCat("--", flag, ": '", path,
                            "' is readable by every user; chmod 600 it (or 640 for a group)");
  }
  return token;
}

}  // namespace outbox
