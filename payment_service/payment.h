#pragma once

// Domain types of the payment service, free of protobuf.
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "service_kit/money.h"
#include "shared/outbox/message.h"

namespace outbox::payment {

inline constexpr char kBizType[] = "payment";
// The message type of the event every payment announces on PAY_QUEUE.
inline constexpr char kPaymentCreatedType[] = "PaymentCreated";

struct PaymentInput {
  std::string idempotency_key;
  std::string payer_account;
  std::string payee_account;
  int64_t amount_minor = 0;
  std::string currency;
  std::string description;
};

// True when two requests carry the same business content (the key aside).
bool SameRequest(const PaymentInput& a, const PaymentInput& b);

// INVALID_ARGUMENT naming the first bad field, or OK.
absl::Status ValidatePaymentInput(const PaymentInput& input,
                                  int64_t max_amount_minor = kDefaultMaxAmountMinor);

struct PaymentRecord {
  int64_t id = 0;  // row id, the paging cursor
  std::string payment_id;
  PaymentInput input;
  int64_t created_at = 0;  // unix ms
  OutboxMessage outbox;
};

}  // namespace outbox::payment
