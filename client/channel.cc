#include "client/channel.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "service_kit/grpc/grpc_status.h"

namespace outbox::client {

absl::StatusOr<ChannelSecurity> ChannelSecurity::FromFiles(const TlsClientFiles& tls,
                                                           const std::string& token_file) {
  ChannelSecurity security;
  auto credentials = ChannelCredentialsFrom(tls);
  if (!credentials.ok()) return credentials.status();
  security.credentials = *std::move(credentials);
  if (!token_file.empty()) {
    std::string warning;
    auto token = ReadTokenFile(token_file, "token_file", &warning);
    if (!token.ok()) return token.status();
    if (!warning.empty()) std::cerr << "warning: " << warning << "\n";
    security.token = *std::move(token);
  }
  return security;
}

std::shared_ptr<grpc::Channel> NewChannel(const std::string& addr,
                                          const ChannelSecurity& security) {
  grpc::ChannelArguments args;
  // Its own connection (a local subchannel pool), so client threads do not
  // all share one HTTP/2 connection.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetServiceConfigJSON(kPaymentServiceConfig);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Not GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: gRPC also takes it as the connect
  // timeout (default 20 s), and 100 ms cut off TLS handshakes on a busy
  // machine ("timed out before receiving SETTINGS frame").
  return CreateChannelWithToken(addr, security.credentials, args, security.token);
}

void SetTimeout(grpc::ClientContext* ctx, absl::Duration timeout) {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

absl::Status WaitHealthy(const std::string& addr, absl::Time deadline,
                         const ChannelSecurity& security) {
  auto stub = grpc::health::v1::Health::NewStub(NewChannel(addr, security));
  grpc::Status last;
  while (true) {
    grpc::ClientContext ctx;
    SetTimeout(&ctx, absl::Seconds(2));
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    last = stub->Check(&ctx, req, &resp);
    if (last.ok() && resp.status() == grpc::health::v1::HealthCheckResponse::SERVING) {
      return absl::OkStatus();
    }
    if (absl::Now() > deadline) break;
    absl::SleepFor(absl::Milliseconds(200));
  }
  return absl::UnavailableError(
      absl::StrCat(addr, " not healthy: ", last.ok() ? "NOT_SERVING" : last.error_message()));
}

absl::Status FromGrpc(const grpc::Status& status, absl::string_view what) {
  return FromGrpcStatus(status, what);
}

}  // namespace outbox::client
