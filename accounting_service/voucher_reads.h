#pragma once

// The ledger's read side, whatever holds it (accounting.db, voucher_store.h,
// or PostgreSQL, pg_voucher_store.h): what the gRPC API serves.
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "accounting_service/voucher.h"
#include "shared/base/internal/page.h"

namespace outbox::accounting {

using VoucherPage = Page<Voucher>;

class VoucherReads {
 public:
  virtual ~VoucherReads() = default;
  // NOT_FOUND when no voucher was booked for `payment_id`.
  virtual absl::StatusOr<Voucher> GetByPayment(const std::string& payment_id) = 0;
  // Up to `limit` vouchers after row `after_id`, in row order.
  virtual absl::StatusOr<VoucherPage> List(int64_t after_id, int limit) = 0;
};

}  // namespace outbox::accounting
