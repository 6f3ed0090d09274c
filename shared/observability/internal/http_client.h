#pragma once

// The HTTP client of Alertmanager's API and the tests' probes, on libcurl:
// one request per call, bounded as a whole by its timeout.
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace outbox {

struct HttpResponse {
  int status = 0;
  std::string body;
};

// POSTs `body` to `url` (http:// or https://). Transport errors (no
// connection, a timeout, a bad URL) are UNAVAILABLE; any HTTP status is
// returned as a response.
absl::StatusOr<HttpResponse> HttpPost(const std::string& url, const std::string& content_type,
                                      const std::string& body, absl::Duration timeout);

// GET, for tests and health probes.
absl::StatusOr<HttpResponse> HttpGet(const std::string& url, absl::Duration timeout);

}  // namespace outbox
