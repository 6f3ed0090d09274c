#include "shared/grpc/grpc_server.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

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

}  // namespace

absl::StatusOr<std::unique_ptr<grpc::Server>> StartGrpcServer(
    const std::string& listen, const std::vector<grpc::Service*>& services, int* bound_port) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  // gRPC sets SO_REUSEPORT by default: a second process on a port in use
  // would then start too, and the kernel would split the clients between
  // two servers with different databases. Without it the bind fails.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Handlers block while their group commits; keep enough polling threads
  // alive that the sync server does not create and destroy one per call.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 4);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 256);
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
  for (grpc::Service* s : services) builder.RegisterService(s);
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

}  // namespace outbox
