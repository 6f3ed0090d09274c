#pragma once

// Prometheus text exposition over plain HTTP (GET /metrics), one small
// thread per service. The caller renders the text from its own counters.
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace outbox {

class MetricsServer {
 public:
  using Render = std::function<std::string()>;

  // `listen` is host:port (port 0 picks one).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(const std::string& listen,
                                                              Render render);
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

// One metric line, with optional labels already formatted (`queue="X"`).
std::string MetricLine(const std::string& name, double value, const std::string& labels = "");
// "# HELP" and "# TYPE" lines.
std::string MetricHeader(const std::string& name, const std::string& type, const std::string& help);

}  // namespace outbox
