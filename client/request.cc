#include "client/request.h"

#include <random>

#include "absl/strings/str_cat.h"

namespace outbox::client {

std::string RandomRunId() {
  std::random_device rd;
  std::string out;
  for (int i = 0; i < 6; ++i) absl::StrAppend(&out, absl::Hex(rd() & 0xff, absl::kZeroPad2));
  return out;
}

std::string KeyPrefix(absl::string_view kind, absl::string_view run_id) {
  return absl::StrCat(kind, "-", run_id, "-");
}

payment::v1::CreatePaymentRequest PaymentRequest(absl::string_view key_prefix, int64_t index,
                                                 absl::string_view description) {
  payment::v1::CreatePaymentRequest r;
  r.set_idempotency_key(absl::StrCat(key_prefix, index));
  r.set_payer_account(absl::StrCat("payer-", index % 50));
  r.set_payee_account(absl::StrCat("payee-", index % 37));
  r.set_amount_minor(100 + index % 10000);
  r.set_currency("EUR");
  r.set_description(std::string(description));
  return r;
}

}  // namespace outbox::client
