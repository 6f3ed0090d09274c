#include "tests/support/cluster.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace outbox::testing {
namespace {

[[noreturn]] void Fail(const std::string& why) {
  std::cerr << "FATAL: " << why << "\n";
  std::abort();
}

// Field `field` (0: number, 1: name, 2: pid file, 3: AMQP port) of node i in DIR/nodes.
std::string NodeField(const std::string& dir, int node, int field) {
  std::ifstream in(dir + "/nodes");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string f[4];
    fields >> f[0] >> f[1] >> f[2] >> f[3];
    if (f[0] == std::to_string(node)) return f[field];
  }
  Fail(absl::StrCat("no node ", node, " in ", dir, "/nodes"));
}

}  // namespace

TestCluster::TestCluster() {
  const char* dir = std::getenv("OUTBOX_TEST_CLUSTER_DIR");
  if (dir == nullptr) {
    Fail(
        "OUTBOX_TEST_CLUSTER_DIR is not set: run this test through ctest, whose cluster "
        "fixture starts a private 3-node RabbitMQ cluster");
  }
  broker_.dir = dir;
  std::ifstream in(absl::StrCat(dir, "/amqp_urls"));
  std::getline(in, broker_.amqp_url);
  absl::StripAsciiWhitespace(&broker_.amqp_url);
  if (broker_.amqp_url.empty()) Fail(absl::StrCat("no URL list in ", dir, "/amqp_urls"));
}

std::string TestCluster::Run(const std::string& args) const {
  const char* script = std::getenv("OUTBOX_CLUSTER_SCRIPT");
  if (script == nullptr) Fail("OUTBOX_CLUSTER_SCRIPT is not set (run through ctest)");
  const std::string cmd = absl::StrCat("bash '", script, "' ", args);
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) Fail(absl::StrCat("cannot run ", cmd));
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  if (pclose(p) != 0) Fail(absl::StrCat("failed: ", cmd, "\n", out));
  return out;
}

pid_t TestCluster::Pid(int node) const {
  std::ifstream in(NodeField(broker_.dir, node, 2));
  pid_t pid = 0;
  if (!(in >> pid) || pid <= 0) Fail(absl::StrCat("node ", node, " has no pid file"));
  return pid;
}

std::string TestCluster::Name(int node) const {
  return NodeField(broker_.dir, node, 1);
}

int TestCluster::Port(int node) const {
  int port = 0;
  if (!absl::SimpleAtoi(NodeField(broker_.dir, node, 3), &port)) Fail("bad port in nodes");
  return port;
}

int TestCluster::Leader(const std::string& queue) const {
  int node = 0;
  const std::string out(
      absl::StripAsciiWhitespace(Run(absl::StrCat("leader '", broker_.dir, "' ", queue))));
  if (!absl::SimpleAtoi(out, &node)) Fail(absl::StrCat("no leader for ", queue, ": ", out));
  return node;
}

std::string TestCluster::Queues() const {
  return Run(absl::StrCat("queues '", broker_.dir, "'"));
}

void TestCluster::StartNode(int node) const {
  Run(absl::StrCat("start-node '", broker_.dir, "' ", node));
}

void TestCluster::WaitWhole() const {
  Run(absl::StrCat("wait '", broker_.dir, "'"));
}

}  // namespace outbox::testing
