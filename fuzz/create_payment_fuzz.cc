// CreatePayment input: the bytes are a CreatePaymentRequest as gRPC would
// parse it, turned into PaymentInput the way the handler does. Whatever
// payment accepts must also be accepted by accounting once it is on the queue:
// otherwise a valid payment would be dead-lettered and never booked.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "accounting_service/accounting_codec.h"
#include "fuzz/fuzz_check.h"
#include "payment/v1/payment.pb.h"
#include "payment_service/payment.h"
#include "payment_service/payment_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ::payment::v1::CreatePaymentRequest req;
  if (!req.ParseFromArray(data, static_cast<int>(size))) return 0;
  outbox::payment::PaymentInput input;
  input.idempotency_key = req.idempotency_key();
  input.payer_account = req.payer_account();
  input.payee_account = req.payee_account();
  input.amount_minor = req.amount_minor();
  input.currency = req.currency();
  input.description = req.description();
  const absl::Status valid = outbox::payment::ValidatePaymentInput(input);
  if (!valid.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(valid));
    return 0;
  }
  const std::string body =
      outbox::payment::EncodePaymentCreated("m-1", "p-1", input, 1'700'000'000'000);
  auto event = outbox::accounting::DecodePaymentCreated(body, "m-1");
  FUZZ_CHECK(event.ok());
  FUZZ_CHECK(event->payer_account == input.payer_account);
  FUZZ_CHECK(event->payee_account == input.payee_account);
  FUZZ_CHECK(event->amount_minor == input.amount_minor);
  FUZZ_CHECK(event->currency == input.currency);
  return 0;
}
