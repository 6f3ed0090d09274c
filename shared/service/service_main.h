#pragma once

// Start-up and shutdown every service binary shares, so each main.cc only
// reads its own flags, wires its parts and waits:
//   int main(int argc, char** argv) { return RunServiceMain(argc, argv, "x", kUsage, Run); }
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/observability/metrics.h"
#include "shared/observability/metrics_server.h"

namespace outbox {

// Blocks the shutdown signals (before any thread starts), sets up --help,
// parses the flags and runs `run`. Exits with ExitCodeFor its status, with
// one log line `<name>_failed` unless it is OK.
int RunServiceMain(int argc, char** argv, const std::string& name, const std::string& usage,
                   const std::function<absl::Status()>& run);

// 0 for OK; 2 when the service cannot start as configured and starting it
// again unchanged will not help: a bad setting (INVALID_ARGUMENT) or a world
// that does not fit it (FAILED_PRECONDITION: its port is taken, its database
// is missing or cannot be opened); 1 otherwise.
int ExitCodeFor(const absl::Status& s);

// INVALID_ARGUMENT unless `listen` is host:port.
absl::Status ValidateListenAddress(const std::string& listen, const std::string& flag_name);

// A running service's front: the gRPC server (health and reflection
// included) and, when `metrics_listen` is set, /metrics.
class Serving {
 public:
  static absl::StatusOr<std::unique_ptr<Serving>> Start(
      const std::string& listen, const std::vector<grpc::Service*>& services,
      const std::string& metrics_listen, const MetricsRegistry& metrics);
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
