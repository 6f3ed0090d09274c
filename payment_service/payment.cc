#include "payment_service/payment.h"

#include "absl/strings/str_cat.h"

namespace outbox::payment {
namespace {

constexpr size_t kMaxKey = 128;
constexpr size_t kMaxAccount = 64;
constexpr size_t kMaxDescription = 256;

bool Printable(const std::string& s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return false;
  }
  return true;
}

absl::Status CheckText(const std::string& value, const char* field, size_t max_len, bool required) {
  if (required && value.empty())
    return absl::InvalidArgumentError(absl::StrCat(field, " is required"));
  if (value.size() > max_len) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, " is longer than ", max_len, " bytes (", value.size(), ")"));
  }
  if (!Printable(value)) {
    return absl::InvalidArgumentError(absl::StrCat(field, " contains control characters"));
  }
  return absl::OkStatus();
}

}  // namespace

bool SameRequest(const PaymentInput& a, const PaymentInput& b) {
  return a.payer_account == b.payer_account && a.payee_account == b.payee_account &&
         a.amount_minor == b.amount_minor && a.currency == b.currency &&
         a.description == b.description;
}

absl::Status ValidatePaymentInput(const PaymentInput& in, int64_t max_amount_minor) {
  absl::Status s = CheckText(in.idempotency_key, "idempotency_key", kMaxKey, true);
  if (s.ok()) s = CheckText(in.payer_account, "payer_account", kMaxAccount, true);
  if (s.ok()) s = CheckText(in.payee_account, "payee_account", kMaxAccount, true);
  if (!s.ok()) return s;
  if (in.amount_minor <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("amount_minor must be > 0 (minor units), got ", in.amount_minor));
  }
  if (in.amount_minor > max_amount_minor) {
    return absl::InvalidArgumentError(absl::StrCat("amount_minor must be at most ",
                                                   max_amount_minor, " (minor units), got ",
                                                   in.amount_minor));
  }
  if (in.currency.size() != 3 || !(in.currency[0] >= 'A' && in.currency[0] <= 'Z') ||
      !(in.currency[1] >= 'A' && in.currency[1] <= 'Z') ||
      !(in.currency[2] >= 'A' && in.currency[2] <= 'Z')) {
    return absl::InvalidArgumentError(absl::StrCat(
        "currency must be a 3-letter upper-case ISO 4217 code, got '", in.currency, "'"));
  }
  s = CheckText(in.description, "description", kMaxDescription, false);
  if (!s.ok()) return s;
  if (in.payer_account == in.payee_account) {
    return absl::InvalidArgumentError("payee_account must differ from payer_account");
  }
  return absl::OkStatus();
}

}  // namespace outbox::payment
