#include "shared/service/service_main.h"

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/grpc/grpc_server.h"
#include "shared/grpc/health_probe.h"
#include "shared/observability/log.h"
#include "shared/runtime/signals.h"
#include "shared/service/cli.h"

// No environment default, unlike every other flag: an inherited variable
// would turn the service itself into a probe.
ABSL_FLAG(std::string, health_check, "",
          "probe mode for container healthchecks: ask host:port for grpc.health.v1.Health/Check "
          "(2 s deadline) and exit 0 if SERVING, 1 otherwise, without starting the service");

namespace outbox {
namespace {

// --health_check: 0 when `addr` is SERVING, 1 otherwise (what a docker
// HEALTHCHECK expects), one log line either way.
int RunHealthCheck(const std::string& addr) {
  absl::Status s = ProbeHealth(addr, kHealthCheckDeadline);
  if (!s.ok()) {
    LogWarning("health_check_failed", {KV("addr", addr), KV("error", s.ToString())});
    return 1;
  }
  LogInfo("health_check_ok", {KV("addr", addr)});
  return 0;
}

}  // namespace

int RunServiceMain(int argc, char** argv, const std::string& name, const std::string& usage,
                   const std::function<absl::Status()>& run) {
  BlockShutdownSignals();
  InitCommandLine(absl::StrCat(usage, "\nEvery flag defaults from the environment variable named "
                                      "in its help."));
  absl::ParseCommandLine(argc, argv);
  if (const std::string probe = absl::GetFlag(FLAGS_health_check); !probe.empty()) {
    return RunHealthCheck(probe);
  }
  absl::Status s = run();
  if (s.ok()) return 0;
  LogError(absl::StrCat(name, "_failed"), {KV("error", s.ToString())});
  return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
}

absl::Status ValidateListenAddress(const std::string& listen, const std::string& flag_name) {
  const size_t colon = listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag_name, " must be host:port, got '", listen, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Serving>> Serving::Start(const std::string& listen,
                                                        const std::vector<grpc::Service*>& services,
                                                        const std::string& metrics_listen,
                                                        const MetricsRegistry& metrics) {
  std::unique_ptr<Serving> serving(new Serving());
  if (!metrics_listen.empty()) {
    ASSIGN_OR_RETURN(serving->metrics_, MetricsServer::Start(metrics_listen, metrics));
  }
  ASSIGN_OR_RETURN(serving->server_, StartGrpcServer(listen, services, &serving->port_));
  return serving;
}

Serving::~Serving() = default;

std::string Serving::WaitForShutdownSignal() { return ::outbox::WaitForShutdownSignal(); }

void Serving::Shutdown() {
  if (server_ != nullptr) ShutdownGrpcServer(*server_);
  LogInfo("grpc_server_stopped");
  metrics_.reset();
}

}  // namespace outbox
