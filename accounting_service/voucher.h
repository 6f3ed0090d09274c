#pragma once

// Domain types of the accounting service, free of protobuf.
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "service_kit/money.h"

namespace outbox::accounting {

// A payment as announced on PAY_QUEUE.
struct PaymentEvent {
  std::string message_id;
  std::string payment_id;
  std::string payer_account;
  std::string payee_account;
  int64_t amount_minor = 0;
  std::string currency;
  std::string traceparent;  // from the message's AMQP header; "" if none
  // The publisher understands a PaymentsAccounted: it may be answered in
  // one reply with the rest of its batch.
  bool batch_replies_accepted = false;
  // The publisher understands business rejects (BookingRules).
  bool rejects_accepted = false;
};

// What accounting books: a well-formed payment outside these is rejected
// (answered "rejected, because ..."), or dead-lettered when its publisher
// does not understand rejects.
struct BookingRules {
  int64_t max_amount_minor = kDefaultMaxAmountMinor;
  std::vector<std::string> currencies;  // kept currencies; empty = any ISO 4217 code
};

// Why `event` will never be booked under `rules`; "" when it may be.
std::string RejectReason(const PaymentEvent& event, const BookingRules& rules);

// INVALID_ARGUMENT naming the bad field: such a message is dead-lettered.
absl::Status ValidatePaymentEvent(const PaymentEvent& event,
                                  int64_t max_amount_minor = kDefaultMaxAmountMinor);

struct Voucher {
  int64_t id = 0;  // row id, the paging cursor
  std::string voucher_id;
  std::string payment_id;
  std::string message_id;
  std::string debit_account;   // payer
  std::string credit_account;  // payee
  int64_t amount_minor = 0;
  std::string currency;
  int64_t created_at = 0;   // unix ms
  std::string traceparent;  // of the message that booked it
};

}  // namespace outbox::accounting
