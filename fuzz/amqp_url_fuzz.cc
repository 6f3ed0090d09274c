// AMQP_URL as a service reads it from its flag or environment.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "fuzz/fuzz_check.h"
#include "shared/amqp/amqp_url.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string url(reinterpret_cast<const char*>(data), size);
  auto parsed = outbox::AmqpUrl::Parse(url);
  if (!parsed.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(parsed.status()));
    return 0;
  }
  FUZZ_CHECK(parsed->port > 0 && parsed->port <= 65535);
  // A node list: every node has a usable port, the first is the one dialled.
  const auto nodes = parsed->Nodes();
  FUZZ_CHECK(!nodes.empty() && nodes[0].host == parsed->host && nodes[0].port == parsed->port);
  for (const auto& node : nodes) FUZZ_CHECK(node.port > 0 && node.port <= 65535);
  // The redacted form goes to logs: it never shows a non-empty password.
  const std::string redacted = parsed->Redacted();
  FUZZ_CHECK(parsed->password.empty() || parsed->password == "***" ||
             redacted.find(":" + parsed->password + "@") == std::string::npos);
  return 0;
}
