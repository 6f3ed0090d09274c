// accounting_service: consumes PAY_QUEUE idempotently (voucher + processed
// message id in one transaction) and replies on ACC_QUEUE, duplicates included.
#include "accounting_service/accounting_flags.h"
#include "accounting_service/accounting_wiring.h"
#include "service_kit/service_flags.h"
#include "service_kit/service_main.h"
#include "shared/base/status_macros.h"

int main(int argc, char** argv) {
  return outbox::RunServiceMain(
      argc, argv, "accounting_service",
      "Books one voucher per payment from PAY_QUEUE and replies to each message.",
      outbox::HealthCheckFromFlags, []() -> absl::Status {
        ASSIGN_OR_RETURN(auto options, outbox::accounting::OptionsFromFlags());
        RETURN_IF_ERROR(options.Validate());
        return outbox::accounting::RunAccountingService(options);
      });
}
