#include "recovery_service/recovery_options.h"

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"

namespace outbox::recovery {

absl::Status RecoveryServiceOptions::Validate() const {
  RETURN_IF_ERROR(worker.Validate());
  if (payment_db_wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--payment_db_wait must not be negative");
  }
  return absl::OkStatus();
}

}  // namespace outbox::recovery
