#pragma once

// The payment service's queue messages: PaymentCreated out, PaymentAccounted in.
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "payment_service/payment.h"

namespace outbox::payment {

std::string EncodePaymentCreated(const std::string& message_id, const std::string& payment_id,
                                 const PaymentInput& input, int64_t created_at_ms);

struct Acknowledgement {
  std::string message_id;  // the PaymentCreated message it acknowledges
  std::string payment_id;
  bool duplicate = false;
};

// INVALID_ARGUMENT when the body is not a PaymentAccounted with a message id.
absl::StatusOr<Acknowledgement> DecodePaymentAccounted(const std::string& body);

}  // namespace outbox::payment
