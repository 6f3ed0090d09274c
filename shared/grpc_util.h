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

// Paging of the List* calls: the token is the last row id of the previous
// page; page_size 0 means 100, larger than 1000 means 1000.
inline constexpr int kDefaultPageSize = 100;
inline constexpr int kMaxPageSize = 1000;
struct PageRequest {
  int limit = kDefaultPageSize;
  int64_t after_id = 0;
};
// INVALID_ARGUMENT for a negative size or a token this service did not make.
absl::StatusOr<PageRequest> ParsePageRequest(int page_size, const std::string& page_token);
// "" on the last page (cursor 0).
std::string NextPageToken(int64_t next_cursor);

// Parses "host:port" for the services' own listen flags.
absl::Status ValidateListenAddress(const std::string& listen, const std::string& flag_name);

}  // namespace outbox
