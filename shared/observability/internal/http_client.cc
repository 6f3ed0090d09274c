#include "shared/observability/internal/http_client.h"

#include <curl/curl.h>

#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace outbox {
namespace {

// libcurl's global state, set up once before the first handle (the call is
// not thread-safe on its own).
void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t AppendBody(char* data, size_t size, size_t count, void* body) {
  static_cast<std::string*>(body)->append(data, size * count);
  return size * count;
}

// One request on a handle of its own. `body` null: GET. The whole request,
// connect and name resolution included, is bounded by `timeout`; libcurl
// tries every address the name resolves to and decodes chunked replies.
absl::StatusOr<HttpResponse> Perform(const std::string& method, const std::string& url,
                                     const std::string* body, const std::string& content_type,
                                     absl::Duration timeout) {
  InitCurlOnce();
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> handle(curl_easy_init(), curl_easy_cleanup);
  if (!handle) return absl::InternalError("http: curl_easy_init failed");
  CURL* h = handle.get();
  const long ms = static_cast<long>(std::max<int64_t>(1, absl::ToInt64Milliseconds(timeout)));
  char error[CURL_ERROR_SIZE] = "";
  HttpResponse response;
  curl_easy_setopt(h, CURLOPT_URL, url.c_str());
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM in a threaded process
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ms);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ms);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, AppendBody);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &response.body);
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(nullptr, curl_slist_free_all);
  if (body != nullptr) {
    headers.reset(curl_slist_append(nullptr, absl::StrCat("Content-Type: ", content_type).c_str()));
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body->data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size()));
  }
  const CURLcode rc = curl_easy_perform(h);
  if (rc != CURLE_OK) {
    return absl::UnavailableError(absl::StrCat("http ", method, " ", url, ": ",
                                               error[0] != '\0' ? error : curl_easy_strerror(rc)));
  }
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  response.status = static_cast<int>(status);
  return response;
}

}  // namespace

absl::StatusOr<HttpResponse> HttpPost(const std::string& url, const std::string& content_type,
                                      const std::string& body, absl::Duration timeout) {
  return Perform("POST", url, &body, content_type, timeout);
}

absl::StatusOr<HttpResponse> HttpGet(const std::string& url, absl::Duration timeout) {
  return Perform("GET", url, nullptr, "", timeout);
}

}  // namespace outbox
