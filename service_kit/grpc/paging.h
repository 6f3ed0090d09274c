#pragma once

// Paging of the List* calls: the token is the last row id of the previous
// page; page_size 0 means 100, larger than 1000 means 1000.
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace outbox {

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

}  // namespace outbox
