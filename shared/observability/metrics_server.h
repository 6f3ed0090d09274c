#pragma once

// GET /metrics over HTTP: prometheus-cpp's Exposer serving a MetricsRegistry
// (and the exposer's own exposer_* series). Any other path answers 404, any
// other method on /metrics 405.
#include <netinet/in.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shared/observability/metrics.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace outbox {

class MetricsServer {
 public:
  // `listen` is host:port with an IPv4 host or localhost (port 0 picks one);
  // anything else: INVALID_ARGUMENT. A port in use or an address that cannot
  // be bound: FAILED_PRECONDITION naming it. `registry` must outlive the
  // server.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& listen,
                                                              const MetricsRegistry& registry);
  // Several registries on one /metrics (each must outlive the server).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const std::string& listen, const std::vector<const MetricsRegistry*>& registries);
  ~MetricsServer();  // stops serving; a scrape in progress finishes first

  int port() const { return port_; }

 private:
  MetricsServer(std::unique_ptr<prometheus::Exposer> exposer, sockaddr_in address);

  std::unique_ptr<prometheus::Exposer> exposer_;
  const sockaddr_in address_;  // where it listens (the port picked, if 0 was asked)
  const int port_;
};

}  // namespace outbox
