#pragma once

// A directory under /tmp for one test, removed with everything in it when the
// object goes. Header-only.
#include <stdlib.h>

#include <filesystem>
#include <string>

namespace outbox {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "outbox_test") {
    std::string tmpl = "/tmp/" + prefix + ".XXXXXX";
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    if (!path_.empty()) std::filesystem::remove_all(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Empty when the directory could not be made.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace outbox
