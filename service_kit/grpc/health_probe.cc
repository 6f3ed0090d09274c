#include "service_kit/grpc/health_probe.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "service_kit/grpc/grpc_status.h"

namespace outbox {

absl::Status ProbeHealth(const std::string& addr, absl::Duration deadline,
                         const TlsClientFiles& tls) {
  const size_t colon = addr.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == addr.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--health_check must be host:port, got '", addr, "'"));
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentialsFrom(tls);
  if (!credentials.ok()) return credentials.status();
  auto stub = grpc::health::v1::Health::NewStub(grpc::CreateChannel(addr, *credentials));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  grpc::health::v1::HealthCheckRequest req;  // service "": the server as a whole
  grpc::health::v1::HealthCheckResponse resp;
  absl::Status s = FromGrpcStatus(stub->Check(&ctx, req, &resp));
  if (!s.ok()) return s;
  if (resp.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return absl::FailedPreconditionError(
        absl::StrCat(addr, " reports ",
                     grpc::health::v1::HealthCheckResponse::ServingStatus_Name(resp.status())));
  }
  return absl::OkStatus();
}

}  // namespace outbox
