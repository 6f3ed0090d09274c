#pragma once

// Money is int64 minor units (cents, pence, ...). The largest amount a payment
// may carry is a setting (MAX_AMOUNT_MINOR) shared by payment_service, which
// refuses larger requests, and accounting_service, which dead-letters larger
// messages: nothing near INT64_MAX reaches a ledger where sums could overflow.
#include <cstdint>

namespace outbox {

inline constexpr int64_t kDefaultMaxAmountMinor = 1'000'000'000'000;  // 10^12 minor units

}  // namespace outbox
