#include "shared/grpc_util.h"

#include <signal.h>

#include <algorithm>


#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace outbox {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

void BlockShutdownSignals() {
  signal(SIGPIPE, SIG_IGN);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

std::string WaitForShutdownSignal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  int sig = 0;
  sigwait(&set, &sig);
  return sig == SIGTERM ? "SIGTERM" : "SIGINT";
}

absl::StatusOr<PageRequest> ParsePageRequest(int page_size, const std::string& page_token) {
  if (page_size < 0) return absl::InvalidArgumentError("page_size must not be negative");
  PageRequest page;
  page.limit = page_size == 0 ? kDefaultPageSize : std::min(page_size, kMaxPageSize);
  if (!page_token.empty() &&
      (!absl::SimpleAtoi(page_token, &page.after_id) || page.after_id < 0)) {
    return absl::InvalidArgumentError("page_token is not a token from this service");
  }
  return page;
}

std::string NextPageToken(int64_t next_cursor) {
  return next_cursor > 0 ? absl::StrCat(next_cursor) : std::string();
}

absl::Status ValidateListenAddress(const std::string& listen, const std::string& flag_name) {
  const size_t colon = listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(listen.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag_name, " must be host:port, got '", listen, "'"));
  }
  return absl::OkStatus();
}

}  // namespace outbox
