#pragma once

// The gRPC edge: the one place where absl::Status becomes grpc::Status.
#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"

namespace outbox {

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace outbox
