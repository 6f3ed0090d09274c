#include "service_kit/grpc/paging.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace outbox {

absl::StatusOr<PageRequest> ParsePageRequest(int page_size, const std::string& page_token) {
  if (page_size < 0) return absl::InvalidArgumentError("page_size must not be negative");
  PageRequest page;
  page.limit = page_size == 0 ? kDefaultPageSize : std::min(page_size, kMaxPageSize);
  if (!page_token.empty() && (!absl::SimpleAtoi(page_token, &page.after_id) || page.after_id < 0)) {
    return absl::InvalidArgumentError("page_token is not a token from this service");
  }
  return page;
}

std::string NextPageToken(int64_t next_cursor) {
  return next_cursor > 0 ? absl::StrCat(next_cursor) : std::string();
}

}  // namespace outbox
