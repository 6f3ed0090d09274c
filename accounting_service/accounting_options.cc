#include "accounting_service/accounting_options.h"

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"

namespace outbox::accounting {

absl::Status AccountingServiceOptions::Validate() const {
  if (shard < 0 || shard >= service.accounting_shards) {
    return absl::InvalidArgumentError(absl::StrCat("--accounting_shard must be 0..",
                                                   service.accounting_shards - 1,
                                                   " (--accounting_shards - 1)"));
  }
  if (prefetch < 1 || prefetch > 65535) {
    return absl::InvalidArgumentError("--prefetch must be 1..65535");
  }
  if (consume_linger_ms < 0 || consume_linger_ms > 1000) {
    return absl::InvalidArgumentError("--consume_linger_ms must be 0..1000");
  }
  if (consume_linger_batch < 1) {
    return absl::InvalidArgumentError("--consume_linger_batch must be at least 1");
  }
  if (processed_retention < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--processed_retention must be >= 0 (0 keeps every id)");
  }
  for (const std::string& c : currencies) {
    bool iso = c.size() == 3;
    for (char ch : c) iso = iso && ch >= 'A' && ch <= 'Z';
    if (!iso) {
      return absl::InvalidArgumentError(
          absl::StrCat("--accepted_currencies: '", c, "' is not an ISO 4217 code (e.g. EUR)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace outbox::accounting
