#include "service_kit/grpc/grpc_server.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <grpc/support/log.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/support/server_interceptor.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.pb.h"
#include "service_kit/grpc/call_gate.h"
#include "service_kit/grpc/reflection_v1.h"
#include "service_kit/grpc/refused_calls.h"
#include "shared/observability/log.h"

namespace outbox {
namespace {

// Why `listen` (host:port) cannot be bound. gRPC logs its reason but hands
// back only a null server, so bind the address once more, as gRPC does
// (SO_REUSEADDR, no SO_REUSEPORT), and report errno.
std::string BindFailureReason(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  std::string host = listen.substr(0, colon == std::string::npos ? 0 : colon);
  const std::string port = colon == std::string::npos ? listen : listen.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0) return absl::StrCat("cannot resolve '", host, "': ", gai_strerror(rc));
  std::string reason;
  for (addrinfo* a = found; a != nullptr && reason.empty(); a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0) {
      reason = errno == EADDRINUSE ? "address already in use (another process holds it)"
                                   : std::strerror(errno);
    }
    close(fd);
  }
  freeaddrinfo(found);
  return reason.empty() ? "gRPC could not bind it (see its log)" : reason;
}

void LogGrpcLine(gpr_log_func_args* args) {
  const LogLevel level = args->severity == GPR_LOG_SEVERITY_ERROR  ? LogLevel::kError
                         : args->severity == GPR_LOG_SEVERITY_INFO ? LogLevel::kInfo
                                                                   : LogLevel::kDebug;
  const absl::string_view file = args->file == nullptr ? "" : args->file;
  Log(level, "grpc_log",
      {KV("file", absl::StrCat(file.substr(file.rfind('/') + 1), ":", args->line)),
       KV("message", args->message == nullptr ? "" : args->message)});
}

// Logs calls refused for their caller (no or a wrong token) or their
// request (invalid argument), with the method and the peer, so that an
// operator can see them, at most one line per peer address and method a
// minute (RefusedCallLog); the status message never holds a token. A call
// the gate refused goes out with the gate's status (a callback method's own
// refusal path would say UNIMPLEMENTED).
class RefusedCallLogger final : public grpc::experimental::Interceptor {
 public:
  RefusedCallLogger(grpc::experimental::ServerRpcInfo* info, const CallGate* gate,
                    RefusedCallLog* log)
      : info_(info), gate_(gate), log_(log) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      grpc::Status status = methods->GetSendStatus();
      const grpc::ServerContextBase* context = info_->server_context();
      const char* method = info_->method() == nullptr ? "" : info_->method();
      if (context != nullptr) {
        if (grpc::Status refused = gate_->Check(method, *context); !refused.ok()) {
          methods->ModifySendStatus(refused);
          status = refused;
        }
      }
      const grpc::StatusCode code = status.error_code();
      if (code == grpc::StatusCode::UNAUTHENTICATED ||
          code == grpc::StatusCode::PERMISSION_DENIED ||
          code == grpc::StatusCode::INVALID_ARGUMENT) {
        const std::string peer = context == nullptr ? "" : context->peer();
        log_->Refused(
            code == grpc::StatusCode::INVALID_ARGUMENT ? LogLevel::kInfo : LogLevel::kWarning,
            method, peer,
            code == grpc::StatusCode::INVALID_ARGUMENT  ? "INVALID_ARGUMENT"
            : code == grpc::StatusCode::UNAUTHENTICATED ? "UNAUTHENTICATED"
                                                        : "PERMISSION_DENIED",
            status.error_message());
      }
    }
    methods->Proceed();
  }

 private:
  grpc::experimental::ServerRpcInfo* info_;
  const CallGate* gate_;
  RefusedCallLog* log_;
};

// Owned by the server (its interceptor creators), so the gate and the
// gated services registered with it live exactly as long as the server.
class RefusedCallLoggerFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RefusedCallLoggerFactory(std::unique_ptr<CallGate> gate)
      : gate_(std::move(gate)), log_(SystemClock::Get()) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new RefusedCallLogger(info, gate_.get(), &log_);
  }

 private:
  std::unique_ptr<CallGate> gate_;
  RefusedCallLog log_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<grpc::Server>> StartGrpcServer(
    const std::string& listen, const std::vector<ServedService>& services, int* bound_port,
    const TlsServerFiles& tls) {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = ServerCredentialsFrom(tls);
  if (!credentials.ok()) return credentials.status();
  auto gate = std::make_unique<CallGate>();
  for (const ServedService& served : services) {
    if (absl::Status s = gate->Add(served); !s.ok()) return s;
  }
  // gRPC's built-in health service is implemented without protobuf, so its
  // descriptor is not in the generated pool unless health.pb.cc is linked in
  // (this reference makes sure it is); only then can reflection describe it.
  if (grpc::health::v1::HealthCheckRequest::descriptor()->file()->FindServiceByName("Health") ==
      nullptr) {
    return absl::InternalError("grpc.health.v1.Health is missing from the descriptor pool");
  }
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();  // v1alpha
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default: a second process on a port in use
  // would then start too, and the kernel would split the clients between
  // two servers with different databases. Without it the bind fails.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.SetMaxReceiveMessageSize(kMaxReceiveMessageBytes);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, kMaxConcurrentStreams);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             static_cast<int>(absl::ToInt64Milliseconds(kMinClientPingInterval)));
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, kMaxPingStrikes);
  AddReflectionV1(builder);
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  const std::vector<grpc::Service*> registered = gate->services();
  interceptors.push_back(std::make_unique<RefusedCallLoggerFactory>(std::move(gate)));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  // Sync handlers (payment's reads, accounting, recovery) block on SQLite;
  // keep enough polling threads alive that the sync server does not create
  // and destroy one per call. Callback handlers (CreatePayment) use none.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 4);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 256);
  int port = 0;
  builder.AddListeningPort(listen, *credentials, &port);
  for (grpc::Service* s : registered) builder.RegisterService(s);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    if (server != nullptr) server->Shutdown();
    return absl::FailedPreconditionError(
        absl::StrCat("cannot listen on ", listen, ": ", BindFailureReason(listen)));
  }
  if (bound_port != nullptr) *bound_port = port;
  server->GetHealthCheckService()->SetServingStatus(true);
  return server;
}

void ShutdownGrpcServer(grpc::Server& server) {
  server.Shutdown(absl::ToChronoTime(absl::Now() + kShutdownGrace));
}

void SendGrpcLogsToOurLog() {
  gpr_set_log_function(LogGrpcLine);
}

}  // namespace outbox
