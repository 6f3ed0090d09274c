#pragma once

// Builds recovery_service from its options and runs it until SIGTERM or
// SIGINT.
#include "absl/status/status.h"
#include "recovery_service/recovery_options.h"

namespace outbox::recovery {

// `options` already validated (Validate()). Checks the listen addresses
// first, then waits for payment_service's database, serves, and after the
// signal stops and releases the lease. An error only when it cannot start.
absl::Status RunRecoveryService(const RecoveryServiceOptions& options);

}  // namespace outbox::recovery
