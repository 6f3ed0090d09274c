#pragma once

// A real Prometheus Alertmanager (Debian's prometheus-alertmanager) on a free
// loopback port, for tests of the alert path.
#include <string>

#include "tests/support/process.h"

namespace outbox::testing {

class Alertmanager {
 public:
  explicit Alertmanager(const std::string& dir);  // aborts the test program if it cannot start
  ~Alertmanager() { process_.Terminate(); }

  const std::string& url() const { return url_; }
  // The JSON of GET /api/v2/alerts ("" on error).
  std::string Alerts() const;

 private:
  Process process_;
  std::string url_;
};

int FreeLoopbackPort();

}  // namespace outbox::testing
