#pragma once

// payment_service's flags: payment_flags.cc is compiled into the payment_service
// binary (and the unit test of its flags), never into payment_lib, so the
// library takes the plain PaymentServiceOptions and defines no flag.
#include "absl/status/statusor.h"
#include "payment_service/payment_options.h"

namespace outbox::payment {

// Reads the flags, the shared ones included (ServiceConfigFromFlags), the
// token file and the shard list; INVALID_ARGUMENT naming a flag that does
// not parse. Validate() is left to the caller.
absl::StatusOr<PaymentServiceOptions> OptionsFromFlags();

}  // namespace outbox::payment
