#pragma once

// A client load for crash and chaos tests: `total` payments with fixed
// idempotency keys, sent from several threads; a failed call (service down,
// crash mid-call) is retried with the same key until it succeeds, as a real
// client of an idempotent API would. The threads and retries are
// client::CreateLoad's.
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "client/create_load.h"
#include "tests/support/services.h"

namespace outbox::testing {

class PaymentLoad {
 public:
  PaymentLoad(ServiceSet& services, std::string key_prefix, int total, int threads,
              absl::Duration pause = absl::ZeroDuration());

  void Join() { load_.Join(); }
  int created() const { return static_cast<int>(load_.created()); }
  int retries() const { return static_cast<int>(load_.retries()); }
  bool done() const { return load_.done(); }
  std::vector<std::string> payment_ids() const;

 private:
  client::CreateLoad load_;
};

// Creates `n` payments one after another (keys prefix0, prefix1, ...),
// expecting each call to succeed; returns them as payment_service answered.
std::vector<::payment::v1::Payment> CreatePayments(ServiceSet& services, const std::string& prefix,
                                                   int n);

// recovery_service's GetStats (a failed call fails the test and returns {}).
::ops::v1::Stats OpsStats(ServiceSet::Recovery& recovery);

struct CheckResult {
  int exit_code = -1;
  std::string output;  // outbox_check --json
};

// Audits the services' stores with the real outbox_check binary: their
// files (payment.db and every accounting shard's) on SQLite, their
// databases' URIs on PostgreSQL.
CheckResult RunChecker(ServiceSet& services);
// ... on payment shard `shard`'s database and the shared accounting one
// (--payment_id_prefix: the shard's vouchers only).
CheckResult RunChecker(ServiceSet& services, int shard);

// Waits until every payment is SENT (or `timeout`); returns the SENT count.
int WaitAllSent(ServiceSet& services, size_t expected, absl::Duration timeout);

}  // namespace outbox::testing
