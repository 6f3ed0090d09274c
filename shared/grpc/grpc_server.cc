#include "shared/grpc/grpc_server.h"

#include <grpc/support/log.h>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.pb.h"
#include "shared/grpc/reflection_v1.h"
#include "shared/observability/log.h"

namespace outbox {
namespace {

void LogGrpcLine(gpr_log_func_args* args) {
  const LogLevel level = args->severity == GPR_LOG_SEVERITY_ERROR  ? LogLevel::kError
                         : args->severity == GPR_LOG_SEVERITY_INFO ? LogLevel::kInfo
                                                                   : LogLevel::kDebug;
  const absl::string_view file = args->file == nullptr ? "" : args->file;
  Log(level, "grpc_log",
      {KV("file", absl::StrCat(file.substr(file.rfind('/') + 1), ":", args->line)),
       KV("message", args->message == nullptr ? "" : args->message)});
}

}  // namespace

absl::StatusOr<std::unique_ptr<grpc::Server>> StartGrpcServer(
    const std::string& listen, const std::vector<grpc::Service*>& services, int* bound_port) {
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
  AddReflectionV1(builder);
  // Handlers block while their group commits; keep enough polling threads
  // alive that the sync server does not create and destroy one per call.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MIN_POLLERS, 4);
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS, 256);
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), bound_port);
  for (grpc::Service* s : services) builder.RegisterService(s);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || (bound_port != nullptr && *bound_port == 0)) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", listen));
  }
  server->GetHealthCheckService()->SetServingStatus(true);
  return server;
}

void ShutdownGrpcServer(grpc::Server& server) {
  server.Shutdown(absl::ToChronoTime(absl::Now() + kShutdownGrace));
}

void SendGrpcLogsToOurLog() { gpr_set_log_function(LogGrpcLine); }

}  // namespace outbox
