#include "service_kit/service_main.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <memory>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "service_kit/cli.h"
#include "service_kit/grpc/grpc_server.h"
#include "service_kit/grpc/health_probe.h"
#include "shared/base/status_macros.h"
#include "shared/observability/log.h"
#include "shared/runtime/signals.h"

namespace outbox {
namespace {

// --health_check: 0 when `addr` is SERVING, 1 otherwise (what a docker
// HEALTHCHECK expects), one log line either way.
int RunHealthCheck(const std::string& addr, const TlsClientFiles& tls) {
  absl::Status s = ProbeHealth(addr, kHealthCheckDeadline, tls);
  if (!s.ok()) {
    LogWarning("health_check_failed", {KV("addr", addr), KV("error", s.ToString())});
    return 1;
  }
  LogInfo("health_check_ok", {KV("addr", addr)});
  return 0;
}

constexpr int kExitCannotStart = 2;

}  // namespace

int RunServiceMain(int argc, char** argv, const std::string& name, const std::string& description,
                   const std::function<HealthCheckRequest()>& health_check,
                   const std::function<absl::Status()>& run) {
  BlockShutdownSignals();
  // A write past RLIMIT_FSIZE would kill the process with SIGXFSZ. Ignored,
  // it fails with EFBIG: SQLite rolls the transaction back and the service
  // answers RESOURCE_EXHAUSTED until there is room again, like a full disk.
  std::signal(SIGXFSZ, SIG_IGN);
  if (std::optional<int> code = ParseServiceCommandLine(argc, argv, name, description)) {
    return *code;
  }
  SendGrpcLogsToOurLog();
  // Debian's Abseil is built without NDEBUG, so every absl::Mutex (gRPC's
  // included) keeps a global lock-order graph on each Lock and destruction:
  // ~3 % of payment_service's CPU at saturation. A debugging aid; the unit
  // tests and the TSan build keep it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  if (const HealthCheckRequest probe = health_check(); !probe.addr.empty()) {
    return RunHealthCheck(probe.addr, probe.tls);
  }
  absl::Status s = run();
  if (s.ok()) return kExitOk;
  LogError(absl::StrCat(name, "_failed"), {KV("error", s.ToString())});
  return kExitCannotStart;
}

absl::Status ValidateListenAddress(const std::string& listen, const std::string& flag_name) {
  auto refuse = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag_name, " '", listen, "': ", why));
  };
  const size_t colon = listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return refuse("must be host:port");
  }
  std::string host = listen.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);  // [::1]
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0)
    return refuse(absl::StrCat("host '", host, "' does not resolve: ", gai_strerror(rc)));
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> free_found(found, freeaddrinfo);
  // Like gRPC, listening works when any of the resolved addresses binds.
  std::string error;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      error = std::strerror(errno);
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    const bool bound = bind(fd, a->ai_addr, a->ai_addrlen) == 0;
    if (!bound) error = std::strerror(errno);
    close(fd);
    if (bound) return absl::OkStatus();
  }
  return refuse(absl::StrCat("cannot listen there: ", error));
}

absl::StatusOr<std::unique_ptr<Serving>> Serving::Start(const std::string& listen,
                                                        const std::vector<ServedService>& services,
                                                        const std::string& metrics_listen,
                                                        const MetricsRegistry& metrics,
                                                        const TlsServerFiles& tls) {
  std::unique_ptr<Serving> serving(new Serving());
  if (!metrics_listen.empty()) {
    ASSIGN_OR_RETURN(serving->metrics_, MetricsServer::Start(metrics_listen, metrics));
  }
  ASSIGN_OR_RETURN(serving->server_, StartGrpcServer(listen, services, &serving->port_, tls));
  return serving;
}

Serving::~Serving() = default;

std::string Serving::WaitForShutdownSignal() {
  return ::outbox::WaitForShutdownSignal();
}

void Serving::Shutdown() {
  if (server_ != nullptr) {
    // Health first, so a balancer or a health-checking client moves away,
    // then the drain: no new calls, in-flight ones finish.
    server_->GetHealthCheckService()->SetServingStatus(false);
    ShutdownGrpcServer(*server_);
  }
  LogInfo("grpc_server_stopped");
  metrics_.reset();
}

}  // namespace outbox
