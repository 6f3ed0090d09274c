#pragma once

// Start-up and shutdown every service binary shares, so each main.cc only
// reads its own flags, wires its parts and waits:
//   int main(int argc, char** argv) {
//     return RunServiceMain(argc, argv, "x", kAbout, HealthCheckFromFlags, Run);
//   }
// It defines no flag: the binary's own flags files do (service_flags.h).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "service_kit/grpc/call_gate.h"
#include "service_kit/grpc/channel_security.h"
#include "service_kit/grpc/server_security.h"
#include "shared/observability/metrics.h"
#include "shared/observability/metrics_server.h"

namespace outbox {

inline constexpr absl::Duration kHealthCheckDeadline = absl::Seconds(2);

// What `--health_check` asks for: the address to probe instead of running
// the service (empty = run it) and the TLS to dial it with.
struct HealthCheckRequest {
  std::string addr;
  TlsClientFiles tls;
};

// Blocks the shutdown signals (before any thread starts), parses the command
// line (--help, --version and usage errors as in service_kit/cli.h), sends
// gRPC's own log lines through ours, and runs `run`, which returns an error
// only when the service cannot start (a bad setting, an address it cannot
// listen on, a database it cannot open). Exit code: 0 after a clean
// shutdown, 2 when it could not start, with one log line
// `<name>_failed error=...`. When `health_check` (called after the command
// line is parsed) names an address it runs nothing:
// it asks that address's gRPC health service and exits 0 if SERVING, 1
// otherwise (for container healthchecks; the deadline is
// kHealthCheckDeadline).
int RunServiceMain(int argc, char** argv, const std::string& name, const std::string& description,
                   const std::function<HealthCheckRequest()>& health_check,
                   const std::function<absl::Status()>& run);

// INVALID_ARGUMENT naming the flag unless `listen` is host:port (port 0
// picks one) and this host can listen there now: the host resolves to a
// local address and the port is free. Checked before anything starts, so a
// bad address is one clear line rather than a gRPC error after the broker
// connections were opened.
absl::Status ValidateListenAddress(const std::string& listen, const std::string& flag_name);

// A running service's front: the gRPC server (health and reflection
// included, each service behind its token check) and, when `metrics_listen` is set, /metrics.
class Serving {
 public:
  static absl::StatusOr<std::unique_ptr<Serving>> Start(const std::string& listen,
                                                        const std::vector<ServedService>& services,
                                                        const std::string& metrics_listen,
                                                        const MetricsRegistry& metrics,
                                                        const TlsServerFiles& tls = {});
  ~Serving();

  int port() const { return port_; }
  // Blocks until SIGTERM or SIGINT; returns its name.
  std::string WaitForShutdownSignal();
  // Stops taking calls; in-flight ones finish within a short grace period.
  void Shutdown();

 private:
  Serving() = default;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsServer> metrics_;
  int port_ = 0;
};

}  // namespace outbox
