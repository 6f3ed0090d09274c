#include "shared/observability/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace outbox {

std::string MetricsHttpStatus(absl::string_view request) {
  // Request line: METHOD SP target SP version. The path is the target up to
  // any query string; it must be exactly /metrics.
  const absl::string_view line = request.substr(0, request.find("\r\n"));
  const std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
  if (parts.size() != 3 || !absl::StartsWith(parts[2], "HTTP/")) return "400 Bad Request";
  const absl::string_view path = parts[1].substr(0, parts[1].find('?'));
  if (path != "/metrics") return "404 Not Found";
  if (parts[0] != "GET") return "405 Method Not Allowed";
  return "200 OK";
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(const std::string& listen,
                                                                    Render render) {
  const size_t colon = listen.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(listen.substr(colon + 1), &port)) {
    return absl::InvalidArgumentError(absl::StrCat("metrics address must be host:port, got '", listen, "'"));
  }
  std::string host = listen.substr(0, colon);
  if (host == "localhost") host = "127.0.0.1";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return absl::InvalidArgumentError(absl::StrCat("metrics host must be an IPv4 address, got '", host, "'"));
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("metrics: socket: ", std::strerror(errno)));
  }
  // Lets a restart bind while old connections sit in TIME_WAIT; on Linux it
  // does not let two processes listen on one port (SO_REUSEPORT would).
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 16) != 0) {
    const int err = errno;
    close(fd);
    // The port or address is the operator's to fix: FAILED_PRECONDITION (exit 2).
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot listen on ", listen, " for /metrics: ",
        err == EADDRINUSE ? "address already in use (another process holds it)"
                          : std::strerror(err)));
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return std::unique_ptr<MetricsServer>(new MetricsServer(fd, ntohs(addr.sin_port), std::move(render)));
}

MetricsServer::MetricsServer(int fd, int port, Render render)
    : fd_(fd), port_(port), render_(std::move(render)) {
  thread_ = std::thread([this] { Run(); });
}

MetricsServer::~MetricsServer() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  close(fd_);
}

void MetricsServer::Run() {
  while (!stop_) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    int client = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    timeval tv{1, 0};
    setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    std::string request;
    char buf[1024];
    while (request.find("\r\n\r\n") == std::string::npos && request.size() < 8192) {
      ssize_t n = recv(client, buf, sizeof(buf), 0);
      if (n <= 0) break;
      request.append(buf, n);
    }
    std::string body;
    const std::string status = MetricsHttpStatus(request);
    if (status == "200 OK") {
      body = render_();
    } else if (status == "405 Method Not Allowed") {
      body = "only GET /metrics\n";
    } else {
      body = "try /metrics\n";
    }
    const std::string response =
        absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: text/plain; version=0.0.4\r\n",
                     "Content-Length: ", body.size(), "\r\nConnection: close\r\n\r\n", body);
    for (size_t sent = 0; sent < response.size();) {
      ssize_t n = send(client, response.data() + sent, response.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += n;
    }
    close(client);
  }
}

}  // namespace outbox
