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
#include "service_kit/grpc/channel_security.h"

namespace outbox::client {

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

// The service config docs/api.md asks every client of PaymentService to
// use, in any language: calls wait for a connection (waitForReady) instead
// of failing while the channel reconnects, and a call the server refused or
// dropped while it stopped (UNAVAILABLE, CANCELLED) is sent again. Both are
// safe because CreatePayment is idempotent by its key; a client's own
// deadline still bounds the whole call.
inline constexpr char kPaymentServiceConfig[] = R"({
  "methodConfig": [{
    "name": [{"service": "payment.v1.PaymentService"}],
    "waitForReady": true,
    "retryPolicy": {
      "maxAttempts": 5,
      "initialBackoff": "0.1s",
      "maxBackoff": "1s",
      "backoffMultiplier": 2,
      "retryableStatusCodes": ["UNAVAILABLE", "CANCELLED"]
    }
  }]
})";

// A channel with kPaymentServiceConfig, reconnect backoff from 100 ms up to
// 1 s, and a connection of its own.
std::shared_ptr<grpc::Channel> NewChannel(const std::string& addr,
                                          const ChannelSecurity& security = {});

// Sets `ctx` to give up `timeout` from now.
void SetTimeout(grpc::ClientContext* ctx, absl::Duration timeout);

// Polls grpc.health.v1 every 200 ms until `addr` reports SERVING. Past
// `deadline`: UNAVAILABLE, "<addr> not healthy: <last answer>".
absl::Status WaitHealthy(const std::string& addr, absl::Time deadline,
                         const ChannelSecurity& security = {});

// A call's gRPC status as an absl::Status: the same code, with the message
// "<what>: <message>" (outbox::FromGrpcStatus, service_kit/grpc/grpc_status.h).
absl::Status FromGrpc(const grpc::Status& status, absl::string_view what);

}  // namespace outbox::client
