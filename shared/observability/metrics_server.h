#pragma once

// Prometheus text exposition over plain HTTP (GET /metrics), one small
// thread per service, rendering a MetricsRegistry.
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shared/observability/metrics.h"

namespace outbox {

// The HTTP status line for a raw request: "200 OK" only for GET /metrics (a
// query string is ignored), "405 Method Not Allowed" for another method on
// it, "404 Not Found" for any other path, "400 Bad Request" for a request
// line that does not parse.
std::string MetricsHttpStatus(absl::string_view request);

class MetricsServer {
 public:
  using Render = std::function<std::string()>;

  // `listen` is host:port (port 0 picks one). A port in use or an address
  // that cannot be bound: FAILED_PRECONDITION naming it.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& listen,
                                                              Render render);
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& listen,
                                                              const MetricsRegistry& registry) {
    return Start(listen, [&registry] { return registry.Render(); });
  }
  ~MetricsServer();

  int port() const { return port_; }

 private:
  MetricsServer(int fd, int port, Render render);
  void Run();

  const int fd_;
  const int port_;
  const Render render_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};


}  // namespace outbox
