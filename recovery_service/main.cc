// recovery_service: re-publishes SENDING outbox rows that were not
// acknowledged in time (linear backoff), fails exhausted ones with an alert,
// and serves the operator API (ops.v1.OutboxOps).
#include "recovery_service/recovery_flags.h"
#include "recovery_service/recovery_wiring.h"
#include "service_kit/service_flags.h"
#include "service_kit/service_main.h"
#include "shared/base/status_macros.h"

int main(int argc, char** argv) {
  return outbox::RunServiceMain(
      argc, argv, "recovery_service",
      "Re-publishes unacknowledged outbox rows, fails exhausted ones with an alert, serves\n"
      "ops.v1.OutboxOps.",
      outbox::HealthCheckFromFlags, []() -> absl::Status {
        ASSIGN_OR_RETURN(auto options, outbox::recovery::OptionsFromFlags());
        RETURN_IF_ERROR(options.Validate());
        return outbox::recovery::RunRecoveryService(options);
      });
}
