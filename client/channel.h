#pragma once

// Client plumbing every load generator needs: a channel, a deadline, the
// services' health, and the one conversion of a gRPC status.
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "shared/grpc/channel_security.h"

namespace outbox::client {

// A channel with its own connection (a local subchannel pool), so client
// threads do not all share one HTTP/2 connection. Reconnect backoff is capped
// at 1 s: a restarted service is used again at once, not after up to 2 minutes.
// How channels reach the services: plaintext and no token by default; TLS
// and a bearer token on every call when made from files.
struct ChannelSecurity {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  std::string token;  // empty = none

  // INVALID_ARGUMENT naming the flag when a file is unusable; `token_file`
  // empty = no token. A token file others can read is used after a warning
  // on stderr.
  static absl::StatusOr<ChannelSecurity> FromFiles(const TlsClientFiles& tls,
                                                   const std::string& token_file);
};

std::shared_ptr<grpc::Channel> NewChannel(const std::string& addr,
                                          const ChannelSecurity& security = {});

// Sets `ctx` to give up `timeout` from now.
void SetTimeout(grpc::ClientContext* ctx, absl::Duration timeout);

// Polls grpc.health.v1 every 200 ms until `addr` reports SERVING. Past
// `deadline`: UNAVAILABLE, "<addr> not healthy: <last answer>".
absl::Status WaitHealthy(const std::string& addr, absl::Time deadline,
                         const ChannelSecurity& security = {});

// The one place a client's gRPC status becomes an absl::Status: the same
// code, with the message "<what>: <message>".
absl::Status FromGrpc(const grpc::Status& status, absl::string_view what);

}  // namespace outbox::client
