#pragma once

// Builds accounting_service from its options and runs it until SIGTERM or
// SIGINT.
#include "absl/status/status.h"
#include "accounting_service/accounting_options.h"

namespace outbox::accounting {

// `options` already validated (Validate()). Checks the listen addresses
// first, then opens the database and the broker connections, serves, and
// after the signal stops. An error only when it cannot start.
absl::Status RunAccountingService(const AccountingServiceOptions& options);

}  // namespace outbox::accounting
