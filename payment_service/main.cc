// payment_service: CreatePayment writes a payment and its outbox row in one
// transaction (a SQLite file, or a PostgreSQL database), publishes to PAY_QUEUE right after the
// commit, and marks the row SENT when accounting's reply arrives on ACC_QUEUE.
#include "payment_service/payment_flags.h"
#include "payment_service/payment_wiring.h"
#include "service_kit/service_flags.h"
#include "service_kit/service_main.h"
#include "shared/base/status_macros.h"

int main(int argc, char** argv) {
  return outbox::RunServiceMain(
      argc, argv, "payment_service",
      "Payments with a transactional outbox: a payment and its message in one\n"
      "transaction (SQLite or PostgreSQL), published to PAY_QUEUE, SENT when\n"
      "accounting replies.",
      outbox::HealthCheckFromFlags, []() -> absl::Status {
        ASSIGN_OR_RETURN(auto options, outbox::payment::OptionsFromFlags());
        RETURN_IF_ERROR(options.Validate());
        return outbox::payment::RunPaymentService(options);
      });
}
