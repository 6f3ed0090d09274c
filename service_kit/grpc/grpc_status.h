#pragma once

// The gRPC edge: the one place where absl::Status and grpc::Status convert.
#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"

namespace outbox {

grpc::Status ToGrpcStatus(const absl::Status& status);
// For our own gRPC clients (the codes are the same numbers).
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace outbox
