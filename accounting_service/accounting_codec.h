#pragma once

// The accounting service's queue messages: PaymentCreated in; out, a
// PaymentAccounted per message, or one PaymentsAccounted for a batch's
// messages whose publisher accepts it.
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "accounting_service/voucher.h"

namespace outbox::accounting {

// Decodes and validates a PAY_QUEUE body. `amqp_message_id` is the AMQP
// property; when present it must equal the body's message id.
// Amounts above `max_amount_minor` are invalid too.
absl::StatusOr<PaymentEvent> DecodePaymentCreated(
    const std::string& body, const std::string& amqp_message_id,
    int64_t max_amount_minor = kDefaultMaxAmountMinor);

// The reply types (the AMQP `type` property).
inline constexpr char kPaymentAccountedType[] = "PaymentAccounted";
inline constexpr char kPaymentsAccountedType[] = "PaymentsAccounted";

// What a reply says of one message.
struct Accounted {
  std::string message_id;  // the PaymentCreated message answered
  std::string payment_id;
  std::string voucher_id;
  bool duplicate = false;       // booked before: this is its voucher
  std::string traceparent;      // accounting's span of the message's trace ("" if none)
  std::string rejected_reason;  // not empty: a business reject (no voucher)
};

std::string EncodePaymentAccounted(const std::string& message_id, const std::string& payment_id,
                                   const std::string& voucher_id, bool duplicate,
                                   int64_t accounted_at_ms);
std::string EncodePaymentAccounted(const Accounted& accounted, int64_t accounted_at_ms);
std::string EncodePaymentsAccounted(const std::vector<Accounted>& accounted,
                                    int64_t accounted_at_ms);

}  // namespace outbox::accounting
