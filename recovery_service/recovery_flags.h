#pragma once

// recovery_service's flags: recovery_flags.cc is compiled into the
// recovery_service binary (and the unit test of its flags), never into
// recovery_lib, so the library takes the plain RecoveryServiceOptions and
// defines no flag.
#include "absl/status/statusor.h"
#include "recovery_service/recovery_options.h"

namespace outbox::recovery {

// Reads the flags, the shared ones included (ServiceConfigFromFlags), and the
// token file; INVALID_ARGUMENT naming a flag that does not parse. Validate()
// is left to the caller.
absl::StatusOr<RecoveryServiceOptions> OptionsFromFlags();

}  // namespace outbox::recovery
