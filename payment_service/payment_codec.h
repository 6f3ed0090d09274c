#pragma once

// The payment service's queue messages: PaymentCreated out, PaymentAccounted in.
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "payment_service/payment.h"
#include "shared/outbox/ack_listener.h"

namespace outbox::payment {

std::string EncodePaymentCreated(const std::string& message_id, const std::string& payment_id,
                                 const PaymentInput& input, int64_t created_at_ms);

// The ack listener's ReplyDecoder: the PaymentCreated message a reply
// acknowledges, with its payment id as the business key. INVALID_ARGUMENT
// when the body is not a PaymentAccounted with a message id.
absl::StatusOr<Acknowledgement> DecodePaymentAccounted(const std::string& body);

}  // namespace outbox::payment
