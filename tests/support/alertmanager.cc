#include "tests/support/alertmanager.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "shared/observability/internal/http_client.h"

namespace outbox::testing {

int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

Alertmanager::Alertmanager(const std::string& dir) {
  const std::string config = dir + "/alertmanager.yml";
  std::ofstream(config)
      << "route:\n  receiver: default\n  group_wait: 1s\nreceivers:\n  - name: default\n";
  const int port = FreeLoopbackPort();
  url_ = absl::StrCat("http://127.0.0.1:", port);
  process_.Start(
      "/usr/bin/prometheus-alertmanager",
      {"--config.file=" + config, "--storage.path=" + dir + "/alertmanager-data",
       absl::StrCat("--web.listen-address=127.0.0.1:", port), "--cluster.listen-address="},
      {}, dir + "/alertmanager.log");
  const bool up = PollUntil(
      [&] {
        auto r = HttpGet(url_ + "/-/ready", absl::Seconds(1));
        return r.ok() && r->status == 200;
      },
      absl::Seconds(30), absl::Milliseconds(200));
  if (!up) {
    std::cerr << "FATAL: alertmanager did not start; log:\n" << process_.Log() << "\n";
    std::abort();
  }
}

std::string Alertmanager::Alerts() const {
  auto r = HttpGet(url_ + "/api/v2/alerts", absl::Seconds(5));
  return r.ok() && r->status == 200 ? r->body : "";
}

}  // namespace outbox::testing
