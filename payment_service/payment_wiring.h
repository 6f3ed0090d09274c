#pragma once

// Builds payment_service from its options and runs it until SIGTERM or SIGINT.
#include "absl/status/status.h"
#include "payment_service/payment_options.h"

namespace outbox::payment {

// `options` already validated (Validate()). Checks the listen addresses
// first, then opens the database and the broker connections, serves, and
// after the signal drains and stops. An error only when it cannot start.
absl::Status RunPaymentService(const PaymentServiceOptions& options);

}  // namespace outbox::payment
