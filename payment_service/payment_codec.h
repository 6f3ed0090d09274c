#pragma once

// The payment service's queue messages: PaymentCreated out, PaymentAccounted or
// PaymentsAccounted in.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "payment_service/payment.h"
#include "shared/outbox/internal/ack_listener.h"

namespace outbox::payment {

std::string EncodePaymentCreated(const std::string& message_id, const std::string& payment_id,
                                 const PaymentInput& input, int64_t created_at_ms);

// The AMQP type of a reply that acknowledges many messages.
inline constexpr char kPaymentsAccountedType[] = "PaymentsAccounted";

// The ack listener's ReplyDecoder. Accounting answers in two shapes: a
// PaymentAccounted per message (any other type: what accounting sends to a
// publisher that did not say it accepts batches, and all an older
// accounting sends), or one PaymentsAccounted for a batch. Each
// acknowledgement names the PaymentCreated message it closes, with its
// payment id as the business key. INVALID_ARGUMENT when the body is not of
// its shape or an entry has no message id.
absl::StatusOr<std::vector<Acknowledgement>> DecodeAccountingReply(const Delivery& reply);

absl::StatusOr<Acknowledgement> DecodePaymentAccounted(const std::string& body);
absl::StatusOr<std::vector<Acknowledgement>> DecodePaymentsAccounted(const std::string& body);

}  // namespace outbox::payment
