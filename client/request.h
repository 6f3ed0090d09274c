#pragma once

// The payments a load generator sends: valid, and named by idempotency keys
// derived from a run id and an index, so a retry, a replay or a later run can
// send the very same request again.
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "payment/v1/payment.pb.h"

namespace outbox::client {

// 12 random hex digits: keeps one run's keys apart from every other run's.
std::string RandomRunId();

// "<kind>-<run_id>-", the key prefix of one run's payments of one kind.
std::string KeyPrefix(absl::string_view kind, absl::string_view run_id);

// Payment `index`: idempotency key `key_prefix` + index; payer and payee
// drawn from two small, disjoint sets of accounts; 100 + index % 10000 minor
// units of EUR. Valid as long as the key stays within 128 bytes.
payment::v1::CreatePaymentRequest PaymentRequest(absl::string_view key_prefix, int64_t index,
                                                 absl::string_view description);

}  // namespace outbox::client
