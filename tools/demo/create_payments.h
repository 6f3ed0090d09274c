#pragma once

// Step 1 of a run: create the payments, --count of them or new ones for
// --duration, on --concurrency threads, retried as the config says.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/create_load.h"
#include "tools/demo/demo_config.h"

namespace outbox::demo {

struct CreatePhase {
  std::vector<client::Created> created;  // every payment tried, in index order
  int64_t wanted = 0;
  int64_t n_created = 0;
  int64_t failed = 0;   // payments given up on
  int64_t retries = 0;  // extra CreatePayment calls
  absl::Duration elapsed;
  std::vector<double> latency_ms;  // of the created ones
};

// Creates the run's payments (keys from `run_id`; by time: until start +
// --duration). Each failure is printed to stderr as it happens.
CreatePhase CreatePayments(const Config& c, const std::string& run_id, absl::Time start);

}  // namespace outbox::demo
