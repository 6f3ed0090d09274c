#pragma once

// The accounting service's queue messages: PaymentCreated in, PaymentAccounted out.
#include <string>

#include "absl/status/statusor.h"
#include "accounting_service/voucher.h"

namespace outbox::accounting {

// Decodes and validates a PAY_QUEUE body. `amqp_message_id` is the AMQP
// property; when present it must equal the body's message id.
// Amounts above `max_amount_minor` are invalid too.
absl::StatusOr<PaymentEvent> DecodePaymentCreated(
    const std::string& body, const std::string& amqp_message_id,
    int64_t max_amount_minor = kDefaultMaxAmountMinor);

std::string EncodePaymentAccounted(const std::string& message_id, const std::string& payment_id,
                                   const std::string& voucher_id, bool duplicate,
                                   int64_t accounted_at_ms);

}  // namespace outbox::accounting
