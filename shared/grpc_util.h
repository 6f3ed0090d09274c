#pragma once

// The gRPC edge: the one place where absl::Status becomes grpc::Status, and
// the process scaffolding every service shares (SIGTERM, listen addresses).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace outbox {

grpc::Status ToGrpcStatus(const absl::Status& status);

// Blocks SIGTERM/SIGINT in the calling thread (call first in main, before
// any thread starts, so every thread inherits the mask) and ignores SIGPIPE.
void BlockShutdownSignals();
// Waits for SIGTERM or SIGINT; returns the signal's name.
std::string WaitForShutdownSignal();

// Parses "host:port" for the services' own listen flags.
absl::Status ValidateListenAddress(const std::string& listen, const std::string& flag_name);

}  // namespace outbox
