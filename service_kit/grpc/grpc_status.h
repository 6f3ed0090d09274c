#pragma once

// The gRPC edge: the one place where absl::Status and grpc::Status convert,
// for the servers and for every client (outboxctl, the client library, the
// health probe). Same code (the two enums share their numbers, 0..16), same
// message.
#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace outbox {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);
// The same, an error's message prefixed "<what>: " (the call that failed).
absl::Status FromGrpcStatus(const grpc::Status& status, absl::string_view what);

}  // namespace outbox
