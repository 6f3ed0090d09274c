#pragma once

// A client load for crash and chaos tests: `total` payments with fixed
// idempotency keys, sent from several threads; a failed call (service down,
// crash mid-call) is retried with the same key until it succeeds, as a real
// client of an idempotent API would.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "tests/support/services.h"

namespace outbox::testing {

class PaymentLoad {
 public:
  PaymentLoad(ServiceSet& services, std::string key_prefix, int total, int threads,
              absl::Duration pause = absl::ZeroDuration());
  ~PaymentLoad() { Join(); }

  void Join();
  int created() const { return created_.load(); }
  int retries() const { return retries_.load(); }
  bool done() const { return finished_threads_.load() == threads_; }
  std::vector<std::string> payment_ids() const;

 private:
  void Run(int thread);

  ServiceSet& services_;
  const std::string prefix_;
  const int total_;
  const int threads_;
  const absl::Duration pause_;
  std::atomic<int> next_{0};
  std::atomic<int> created_{0};
  std::atomic<int> retries_{0};
  std::atomic<int> finished_threads_{0};
  mutable absl::Mutex mu_;
  std::vector<std::string> ids_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_;
};

struct CheckResult {
  int exit_code = -1;
  std::string output;  // outbox_check --json
};

// Runs the real outbox_check binary on the services' two databases.
CheckResult RunChecker(const ServiceSet& services);

// Waits until every payment is SENT (or `timeout`); returns the SENT count.
int WaitAllSent(ServiceSet& services, size_t expected, absl::Duration timeout);

}  // namespace outbox::testing
