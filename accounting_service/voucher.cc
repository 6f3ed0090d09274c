#include "accounting_service/voucher.h"

#include <algorithm>

#include "absl/strings/str_join.h"

#include "absl/strings/str_cat.h"

namespace outbox::accounting {

absl::Status ValidatePaymentEvent(const PaymentEvent& e, int64_t max_amount_minor) {
  if (e.message_id.empty()) return absl::InvalidArgumentError("message_id is empty");
  if (e.payment_id.empty()) return absl::InvalidArgumentError("payment_id is empty");
  if (e.payer_account.empty()) return absl::InvalidArgumentError("payer_account is empty");
  if (e.payee_account.empty()) return absl::InvalidArgumentError("payee_account is empty");
  if (e.payer_account == e.payee_account)
    return absl::InvalidArgumentError("payee_account equals payer_account");
  if (e.amount_minor <= 0)
    return absl::InvalidArgumentError(
        absl::StrCat("amount_minor must be > 0, got ", e.amount_minor));
  if (e.amount_minor > max_amount_minor) {
    return absl::InvalidArgumentError(
        absl::StrCat("amount_minor must be at most ", max_amount_minor, ", got ", e.amount_minor));
  }
  bool currency_ok = e.currency.size() == 3;
  for (char c : e.currency) currency_ok = currency_ok && c >= 'A' && c <= 'Z';
  if (!currency_ok)
    return absl::InvalidArgumentError(
        absl::StrCat("currency '", e.currency, "' is not an ISO 4217 code"));
  return absl::OkStatus();
}

std::string RejectReason(const PaymentEvent& e, const BookingRules& rules) {
  if (e.amount_minor > rules.max_amount_minor) {
    return absl::StrCat("amount_minor ", e.amount_minor, " is over accounting's limit of ",
                        rules.max_amount_minor);
  }
  if (!rules.currencies.empty() && std::find(rules.currencies.begin(), rules.currencies.end(),
                                             e.currency) == rules.currencies.end()) {
    return absl::StrCat("currency '", e.currency, "' is not kept by accounting (it keeps ",
                        absl::StrJoin(rules.currencies, ", "), ")");
  }
  return "";
}

}  // namespace outbox::accounting
