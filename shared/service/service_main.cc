#include "shared/service/service_main.h"

#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/grpc/grpc_server.h"
#include "shared/observability/log.h"
#include "shared/runtime/signals.h"
#include "shared/service/cli.h"

namespace outbox {

int RunServiceMain(int argc, char** argv, const std::string& name, const std::string& usage,
                   const std::function<absl::Status()>& run) {
  BlockShutdownSignals();
  InitCommandLine(absl::StrCat(usage, "\nEvery flag defaults from the environment variable named "
                                      "in its help."));
  absl::ParseCommandLine(argc, argv);
  absl::Status s = run();
  if (s.ok()) return 0;
  LogError(absl::StrCat(name, "_failed"), {KV("error", s.ToString())});
  return ExitCodeFor(s);
}

int ExitCodeFor(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk: return 0;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition: return 2;
    default: return 1;
  }
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
