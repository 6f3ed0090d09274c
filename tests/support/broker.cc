#include "tests/support/broker.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace outbox::testing {
namespace {

[[noreturn]] void Fail(const std::string& why) {
  std::cerr << "FATAL: " << why << "\n";
  std::abort();
}

void RunNodeScript(const std::string& verb, const Broker& broker) {
  const char* script = std::getenv("OUTBOX_NODE_SCRIPT");
  if (script == nullptr) Fail("OUTBOX_NODE_SCRIPT is not set (run through ctest)");
  const std::string cmd = absl::StrCat("bash '", script, "' ", verb, " '", broker.dir, "'");
  if (std::system(cmd.c_str()) != 0) Fail(absl::StrCat("failed: ", cmd));
}

}  // namespace

Broker TestBroker() {
  const char* dir = std::getenv("OUTBOX_TEST_BROKER_DIR");
  if (dir == nullptr) {
    Fail(
        "OUTBOX_TEST_BROKER_DIR is not set: run this test through ctest, whose broker "
        "fixture starts a private RabbitMQ node");
  }
  Broker b;
  b.dir = dir;
  std::ifstream in(absl::StrCat(dir, "/amqp_url"));
  std::getline(in, b.amqp_url);
  absl::StripAsciiWhitespace(&b.amqp_url);
  if (b.amqp_url.empty()) Fail(absl::StrCat("no broker URL in ", dir, "/amqp_url"));
  std::ifstream tls(absl::StrCat(dir, "/amqps_url"));
  std::getline(tls, b.amqps_url);
  absl::StripAsciiWhitespace(&b.amqps_url);
  // broker.env names the CA file; its directory holds the rest of the set.
  std::ifstream env(absl::StrCat(dir, "/broker.env"));
  constexpr absl::string_view kCaFile = "AMQP_TLS_CA_FILE=";
  for (std::string line; std::getline(env, line);) {
    if (absl::StartsWith(line, kCaFile)) {
      b.tls_dir = std::filesystem::path(line.substr(kCaFile.size())).parent_path().string();
    }
  }
  if (b.amqps_url.empty() || b.tls_dir.empty()) {
    Fail(absl::StrCat("the broker in ", dir, " has no TLS listener (AMQP_TLS_DIR)"));
  }
  return b;
}

BrokerUser ServiceBrokerUser(const Broker& broker, const std::string& user) {
  BrokerUser u;
  const std::string base = absl::StrCat(broker.dir, "/users/", user);
  std::ifstream in(base + ".url");
  std::getline(in, u.url);
  absl::StripAsciiWhitespace(&u.url);
  if (u.url.empty()) Fail(absl::StrCat("no broker user ", user, " in ", broker.dir, "/users"));
  u.password_file = base + ".password";
  return u;
}

void StopBroker(const Broker& broker) {
  RunNodeScript("stop", broker);
}
void StartBroker(const Broker& broker) {
  RunNodeScript("start", broker);
}

std::string UniqueName(const std::string& prefix) {
  std::random_device rd;
  return absl::StrCat(prefix, "_", getpid(), "_", rd() % 1000000);
}

}  // namespace outbox::testing
