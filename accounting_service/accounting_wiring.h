#pragma once

// Builds accounting_service from its options and runs it until SIGTERM or
// SIGINT.
#include "absl/status/status.h"
#include "accounting_service/accounting_options.h"
#include "shared/observability/metrics.h"
#include "shared/roles/consumer.h"

namespace outbox::accounting {

// The consumer role's options for `options`: its shard's queue, answered on
// ACC_QUEUE through the replies exchange (and the payment shards' reply
// queues), with accounting's connection names, counter, crash points and
// signing; `metrics` is the service's registry.
Consumer::Options ConsumerOptionsOf(const AccountingServiceOptions& options,
                                    MetricsRegistry& metrics);

// `options` already validated (Validate()). Checks the listen addresses
// first, then opens the database and the broker connections, serves, and
// after the signal stops. An error only when it cannot start.
absl::Status RunAccountingService(const AccountingServiceOptions& options);

}  // namespace outbox::accounting
