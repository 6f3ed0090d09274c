#pragma once

// For accounting's PostgreSQL tests: one server of scripts/postgres_node.sh
// per test program (a gtest Environment), and a schema of its own for each
// test on it. Header-only.
#include <stdio.h>
#include <sys/stat.h>

#include <array>
#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "shared/postgres/pg_connection.h"
#include "shared/testing/temp_dir.h"

namespace outbox::accounting {

// scripts/postgres_node.sh ARGS: its standard output, or "" when it fails.
inline std::string PgNode(const std::string& args) {
  const std::string script = std::string(OUTBOX_SOURCE_DIR) + "/scripts/postgres_node.sh";
  std::string out;
  FILE* pipe = popen(absl::StrCat("bash ", script, " ", args, " 2>&1").c_str(), "r");
  if (pipe == nullptr) return "";
  std::array<char, 512> buf;
  while (fgets(buf.data(), buf.size(), pipe) != nullptr) out += buf.data();
  if (pclose(pipe) != 0) {
    ADD_FAILURE() << "postgres_node.sh " << args << ": " << out;
    return "";
  }
  return std::string(absl::StripTrailingAsciiWhitespace(out));
}

class PgTestServer : public ::testing::Environment {
 public:
  explicit PgTestServer(std::string name) : name_(std::move(name)) {}
  void SetUp() override {
    dir_ = std::make_unique<outbox::TempDir>(name_);
    chmod(dir_->path().c_str(), 0755);  // for the user postgres, under root
    node_ = dir_->path() + "/primary";
    PgNode("fresh " + node_);
    url_ = PgNode("url " + node_);
    ASSERT_FALSE(url_.empty());
  }
  void TearDown() override {
    PgNode("stop " + node_);
    dir_.reset();
  }
  // The server's libpq URI (its password file named in it, not the password).
  static const std::string& url() { return url_; }
  static const std::string& node() { return node_; }

  // A schema of its own on the server: the URI whose connections work in it.
  static std::string FreshSchema() {
    static std::atomic<int> next{0};
    const std::string name = absl::StrCat("t", next++);
    auto admin = PgConnection::Open(url_);
    EXPECT_TRUE(admin.ok()) << admin.status();
    if (!admin.ok()) return "";
    EXPECT_TRUE((*admin)->Exec("CREATE SCHEMA " + name).ok());
    return absl::StrCat(url_, url_.find('?') == std::string::npos ? "?" : "&",
                        "options=-csearch_path%3D", name);
  }

 private:
  const std::string name_;
  std::unique_ptr<outbox::TempDir> dir_;
  static inline std::string node_;
  static inline std::string url_;
};

}  // namespace outbox::accounting
