#pragma once

// A minimal HTTP/1.1 client for plain-http endpoints on the local network
// (Alertmanager's API). One request per connection; no TLS.
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace outbox {

struct HttpResponse {
  int status = 0;
  std::string body;
};

// POSTs `body` to `url` (http://host:port/path). Transport errors are
// UNAVAILABLE; any HTTP status is returned as a response.
absl::StatusOr<HttpResponse> HttpPost(const std::string& url, const std::string& content_type,
                                      const std::string& body, absl::Duration timeout);

// GET, for tests and health probes.
absl::StatusOr<HttpResponse> HttpGet(const std::string& url, absl::Duration timeout);

}  // namespace outbox
