#pragma once

// Client plumbing every load generator needs: a channel, a deadline, the
// services' health, and the one conversion of a gRPC status.
#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace outbox::loadgen {

// A channel with its own connection (a local subchannel pool), so client
// threads do not all share one HTTP/2 connection. Reconnect backoff is capped
// at 1 s: a restarted service is used again at once, not after up to 2 minutes.
std::shared_ptr<grpc::Channel> NewChannel(const std::string& addr);

// Sets `ctx` to give up `timeout` from now.
void SetTimeout(grpc::ClientContext* ctx, absl::Duration timeout);

// Polls grpc.health.v1 every 200 ms until `addr` reports SERVING. Past
// `deadline`: UNAVAILABLE, "<addr> not healthy: <last answer>".
absl::Status WaitHealthy(const std::string& addr, absl::Time deadline);

// The one place a client's gRPC status becomes an absl::Status: the same
// code, with the message "<what>: <message>".
absl::Status FromGrpc(const grpc::Status& status, absl::string_view what);

}  // namespace outbox::loadgen
