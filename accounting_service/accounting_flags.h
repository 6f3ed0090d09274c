#pragma once

// accounting_service's flags: accounting_flags.cc is compiled into the accounting_service
// binary (and the unit test of its flags), never into accounting_lib, so the
// library takes the plain AccountingServiceOptions and defines no flag.
#include "absl/status/statusor.h"
#include "accounting_service/accounting_options.h"

namespace outbox::accounting {

// Reads the flags, the shared ones included (ServiceConfigFromFlags), and the
// token file; INVALID_ARGUMENT naming a flag that does not parse. Validate()
// is left to the caller.
absl::StatusOr<AccountingServiceOptions> OptionsFromFlags();

}  // namespace outbox::accounting
