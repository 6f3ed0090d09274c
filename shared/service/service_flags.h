#pragma once

// The settings every service shares, defined once (service_flags.cc) so the
// three binaries read the same names and environment variables: the broker,
// the queues, SQLite durability, the retry policy and the alert sink.
#include <string>

#include "absl/status/statusor.h"
#include "shared/amqp/amqp_client.h"
#include "shared/base/money.h"
#include "shared/outbox/retry_policy.h"
#include "shared/sqlite/sqlite_file.h"

namespace outbox {

struct ServiceConfig {
  AmqpUrl amqp;
  std::string pay_queue;   // payment events: payment and recovery publish, accounting consumes
  std::string acc_queue;   // acknowledgements: accounting replies, payment consumes
  std::string queue_type;  // x-queue-type of declared queues ("" = classic, "quorum")
  DbOptions db;
  RetryPolicy retry;       // payment writes attempt 1 and the budget; recovery the rest
  std::string alertmanager_url;
  int64_t max_amount_minor = kDefaultMaxAmountMinor;  // the same bound on both sides

  // Declares both queues and their dead-letter queues.
  Topology topology() const { return {{pay_queue, acc_queue}, queue_type}; }
};

// Reads and validates the shared flags; INVALID_ARGUMENT names the bad one.
absl::StatusOr<ServiceConfig> ServiceConfigFromFlags();

}  // namespace outbox
