#pragma once

// PostgreSQL servers of scripts/postgres_node.sh for tests: the script run
// as a command (PgNode), a primary with an optional synchronous standby in a
// directory of their own (PgServers), the binary's servers as a GoogleTest
// environment (AddPgServers), and a schema or database of its own for each
// test on them (FreshPgSchema, FreshPgDatabase). Passwords stay in the
// nodes' files: a node's URL has none, libpq reads it from the node's
// pgpass (the URL's passfile). Header-only; stays in this tree, not part of
// the test kit. The script is $OUTBOX_PG_NODE_SCRIPT, else
// OUTBOX_SOURCE_DIR/scripts/postgres_node.sh (a compile definition of the
// test's target).
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "shared/postgres/pg_connection.h"
#include "shared/testing/temp_dir.h"

namespace outbox::testing {

// The path of scripts/postgres_node.sh.
inline std::string PgNodeScript() {
  if (const char* script = getenv("OUTBOX_PG_NODE_SCRIPT"); script != nullptr && *script != 0) {
    return script;
  }
#ifdef OUTBOX_SOURCE_DIR
  return std::string(OUTBOX_SOURCE_DIR) + "/scripts/postgres_node.sh";
#else
  return "scripts/postgres_node.sh";
#endif
}

// scripts/postgres_node.sh ARGS: its standard output without the trailing
// newline, or "" (and a test failure) when it fails.
inline std::string PgNode(const std::string& args) {
  std::string out;
  FILE* pipe = popen(absl::StrCat("bash ", PgNodeScript(), " ", args, " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "postgres_node.sh " << args << ": cannot run it";
    return "";
  }
  std::array<char, 512> buf;
  while (fgets(buf.data(), buf.size(), pipe) != nullptr) out += buf.data();
  if (pclose(pipe) != 0) {
    ADD_FAILURE() << "postgres_node.sh " << args << ": " << out;
    return "";
  }
  return std::string(absl::StripTrailingAsciiWhitespace(out));
}

// The port of the node in `dir` (its node.env), 0 when unknown.
inline int PgNodePort(const std::string& dir) {
  std::ifstream in(dir + "/node.env");
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view rest = line;
    int port = 0;
    if (absl::ConsumePrefix(&rest, "PGPORT_NODE=") && absl::SimpleAtoi(rest, &port)) return port;
  }
  return 0;
}

// The role outbox's password of the node in `dir`, for tests that must see
// it is not echoed; a test never puts it in a connection string.
inline std::string PgNodePassword(const std::string& dir) {
  std::ifstream in(dir + "/password");
  std::string line;
  std::getline(in, line);
  return line;
}

// libpq's password file for the node in `dir` (PGPASSFILE).
inline std::string PgNodePgpass(const std::string& dir) {
  return dir + "/pgpass";
}

// A port of 127.0.0.1 nothing listens on (bound, then closed); 0 when
// none could be had.
inline int ClosedLocalPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  close(fd);
  return port;
}

// `url` (a node's URL) with `query` ("key=value") added to its parameters.
inline std::string PgUrlWith(const std::string& url, const std::string& query) {
  return absl::StrCat(url, url.find('?') == std::string::npos ? "?" : "&", query);
}

// `url` (a node's URL, database outbox) naming the database `name`.
inline std::string PgUrlOfDatabase(const std::string& url, const std::string& name) {
  return absl::StrReplaceAll(url, {{"/outbox?", absl::StrCat("/", name, "?")}});
}

// A primary of scripts/postgres_node.sh, and its synchronous standby when
// asked, each in a directory of its own under a fresh one in /tmp; started
// by the constructor, stopped and removed by the destructor.
class PgServers {
 public:
  enum Standby { kNoStandby, kWithStandby };

  explicit PgServers(const std::string& prefix, Standby standby = kNoStandby) : dir_(prefix) {
    chmod(dir_.path().c_str(), 0755);  // for the user postgres, under root
    primary_ = dir_.path() + "/primary";
    ok_ = !PgNode("fresh " + primary_).empty();
    if (ok_ && standby == kWithStandby) {
      standby_ = dir_.path() + "/standby";
      ok_ = !PgNode(absl::StrCat("standby ", primary_, " ", standby_)).empty();
    }
    if (ok_) url_ = PgNode("url " + primary_);
    ok_ = ok_ && !url_.empty();
  }
  ~PgServers() {
    Stop();
    for (auto& f : at_stop_) f();
  }
  PgServers(const PgServers&) = delete;
  PgServers& operator=(const PgServers&) = delete;

  // Whether every node started.
  bool ok() const { return ok_; }
  // The directory holding the nodes' (and free for the test's own files).
  const std::string& dir() const { return dir_.path(); }
  // The nodes' directories; standby() is "" without one.
  const std::string& primary() const { return primary_; }
  const std::string& standby() const { return standby_; }
  // The primary's URL, database outbox, as it started.
  const std::string& url() const { return url_; }
  // The URL of `node` now (after a promotion, a standby's too).
  static std::string UrlOf(const std::string& node) { return PgNode("url " + node); }
  // One URL naming both nodes, the read-write one winning
  // (target_session_attrs=read-write): a client's string across a failover.
  std::string FailoverUrl() const { return PgNode(absl::StrCat("url ", primary_, " ", standby_)); }
  // libpq's password file for both nodes (they share the password).
  std::string pgpass() const { return PgNodePgpass(primary_); }

  // The script's verbs on one node; false when it fails.
  static bool Kill(const std::string& node) { return !PgNode("kill " + node).empty(); }
  static bool Start(const std::string& node) { return !PgNode("start " + node).empty(); }
  static bool Promote(const std::string& node) { return !PgNode("promote " + node).empty(); }

  // Stops the nodes (again: a no-op).
  void Stop() {
    if (!standby_.empty()) PgNode("stop " + standby_);
    PgNode("stop " + primary_);
  }
  // Runs `f` once the nodes are stopped, before the directory goes (e.g.
  // to unmount what a server had files on).
  void AtStop(std::function<void()> f) { at_stop_.push_back(std::move(f)); }

 private:
  TempDir dir_;
  std::string primary_;
  std::string standby_;
  std::string url_;
  bool ok_ = false;
  std::vector<std::function<void()>> at_stop_;
};

// The test binary's servers: started before its first test, stopped after
// its last. servers() exists between the two.
class PgServersEnvironment : public ::testing::Environment {
 public:
  PgServersEnvironment(std::string prefix, PgServers::Standby standby)
      : prefix_(std::move(prefix)), standby_(standby) {}
  void SetUp() override {
    servers_ = std::make_unique<PgServers>(prefix_, standby_);
    ASSERT_TRUE(servers_->ok()) << "the PostgreSQL servers did not start";
  }
  void TearDown() override { servers_.reset(); }
  PgServers& servers() { return *servers_; }
  const std::string& url() const { return servers_->url(); }
  // A schema of its own on the primary (t0, t1, ... as asked):
  // FreshPgSchema's URL, "" (and a test failure) when it cannot.
  std::string FreshSchema(const std::string& options = "");

 private:
  std::string prefix_;
  PgServers::Standby standby_;
  std::unique_ptr<PgServers> servers_;
  std::atomic<int> next_schema_{0};
};

// Registers the binary's servers with GoogleTest, at namespace scope:
//   PgServersEnvironment* const kServer = AddPgServers("my_test");
inline PgServersEnvironment* AddPgServers(const std::string& prefix,
                                          PgServers::Standby standby = PgServers::kNoStandby) {
  auto* env = new PgServersEnvironment(prefix, standby);
  ::testing::AddGlobalTestEnvironment(env);
  return env;
}

// Creates the schema `name` in `url`'s database and returns the URL that
// works in it (its search_path), with `options` for the server
// ("%20-c..." each, URL-encoded) after it; "" (and a test failure) when
// it cannot.
inline std::string FreshPgSchema(const std::string& url, const std::string& name,
                                 const std::string& options = "") {
  auto admin = PgConnection::Open(url);
  EXPECT_TRUE(admin.ok()) << admin.status();
  if (!admin.ok()) return "";
  const absl::Status made = (*admin)->Exec("CREATE SCHEMA " + name);
  EXPECT_TRUE(made.ok()) << made;
  if (!made.ok()) return "";
  return PgUrlWith(url, absl::StrCat("options=-csearch_path%3D", name, options));
}

inline std::string PgServersEnvironment::FreshSchema(const std::string& options) {
  return FreshPgSchema(url(), absl::StrCat("t", next_schema_++), options);
}

// Creates the database `name` on `url`'s server and returns `url` naming
// it; "" (and a test failure) when it cannot.
inline std::string FreshPgDatabase(const std::string& url, const std::string& name) {
  auto admin = PgConnection::Open(url);
  EXPECT_TRUE(admin.ok()) << admin.status();
  if (!admin.ok()) return "";
  const absl::Status made = (*admin)->Exec("CREATE DATABASE " + name);
  EXPECT_TRUE(made.ok()) << made;
  if (!made.ok()) return "";
  return PgUrlOfDatabase(url, name);
}

// The first column of `sql`'s first row as a number; -1 (and a test
// failure) when there is none.
inline int64_t PgCount(PgConnection& conn, const std::string& sql) {
  auto r = conn.Query(sql);
  EXPECT_TRUE(r.ok()) << sql << ": " << r.status();
  int64_t n = -1;
  if (r.ok() && r->rows() > 0) EXPECT_TRUE(absl::SimpleAtoi(r->Get(0, 0), &n)) << sql;
  return n;
}

// The first column of `sql`'s rows.
inline std::vector<std::string> PgStrings(PgConnection& conn, const std::string& sql) {
  std::vector<std::string> out;
  auto r = conn.Query(sql);
  EXPECT_TRUE(r.ok()) << sql << ": " << r.status();
  if (!r.ok()) return out;
  for (int i = 0; i < r->rows(); ++i) out.emplace_back(r->Get(i, 0));
  return out;
}

}  // namespace outbox::testing
