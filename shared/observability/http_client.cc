#include "shared/observability/http_client.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace outbox {
namespace {

struct ParsedUrl {
  std::string host;
  std::string port = "80";
  std::string path = "/";
};

absl::StatusOr<ParsedUrl> ParseHttpUrl(const std::string& url) {
  constexpr absl::string_view kScheme = "http://";
  if (!absl::StartsWith(url, kScheme)) {
    return absl::InvalidArgumentError(absl::StrCat("not an http:// URL: '", url, "'"));
  }
  std::string rest = url.substr(kScheme.size());
  ParsedUrl out;
  const size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) out.path = rest.substr(slash);
  const size_t colon = authority.rfind(':');
  if (colon != std::string::npos) {
    out.port = authority.substr(colon + 1);
    authority = authority.substr(0, colon);
  }
  out.host = authority;
  if (out.host.empty()) return absl::InvalidArgumentError(absl::StrCat("no host in '", url, "'"));
  return out;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

absl::StatusOr<HttpResponse> Request(const std::string& method, const std::string& url,
                                     const std::string& content_type, const std::string& body,
                                     absl::Duration timeout) {
  auto parsed = ParseHttpUrl(url);
  if (!parsed.ok()) return parsed.status();
  const absl::Time deadline = absl::Now() + timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(parsed->host.c_str(), parsed->port.c_str(), &hints, &res) != 0 || res == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", parsed->host));
  }
  Fd fd(socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int rc = fd.get() >= 0 ? connect(fd.get(), res->ai_addr, res->ai_addrlen) : -1;
  freeaddrinfo(res);
  if (rc != 0) {
    return absl::UnavailableError(absl::StrCat("connect ", parsed->host, ":", parsed->port, ": ",
                                               std::strerror(errno)));
  }
  timeval tv = absl::ToTimeval(timeout);
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  std::string request = absl::StrCat(method, " ", parsed->path, " HTTP/1.1\r\nHost: ", parsed->host,
                                     ":", parsed->port, "\r\nConnection: close\r\n");
  if (!body.empty() || method == "POST") {
    absl::StrAppend(&request, "Content-Type: ", content_type, "\r\nContent-Length: ", body.size(),
                    "\r\n");
  }
  absl::StrAppend(&request, "\r\n", body);
  for (size_t sent = 0; sent < request.size();) {
    ssize_t n = send(fd.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return absl::UnavailableError(absl::StrCat("send: ", std::strerror(errno)));
    sent += n;
  }
  std::string response;
  char buf[4096];
  while (absl::Now() < deadline) {
    ssize_t n = recv(fd.get(), buf, sizeof(buf), 0);
    if (n < 0) return absl::UnavailableError(absl::StrCat("recv: ", std::strerror(errno)));
    if (n == 0) break;
    response.append(buf, n);
  }
  // "HTTP/1.1 200 OK\r\n..."
  HttpResponse out;
  const size_t sp = response.find(' ');
  if (sp == std::string::npos || !absl::SimpleAtoi(response.substr(sp + 1, 3), &out.status)) {
    return absl::UnavailableError("malformed HTTP response");
  }
  const size_t header_end = response.find("\r\n\r\n");
  if (header_end != std::string::npos) out.body = response.substr(header_end + 4);
  return out;
}

}  // namespace

absl::StatusOr<HttpResponse> HttpPost(const std::string& url, const std::string& content_type,
                                      const std::string& body, absl::Duration timeout) {
  return Request("POST", url, content_type, body, timeout);
}

absl::StatusOr<HttpResponse> HttpGet(const std::string& url, absl::Duration timeout) {
  return Request("GET", url, "", "", timeout);
}

}  // namespace outbox
