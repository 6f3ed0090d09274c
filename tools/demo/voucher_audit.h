#pragma once

// The vouchers of the set: exactly one per payment, each matching it.
#include <cstdint>

#include "accounting/v1/accounting.grpc.pb.h"
#include "tools/demo/payment_set.h"

namespace outbox::demo {

struct VoucherAudit {
  bool listed = false;
  int64_t vouchers = 0, mismatched = 0, orphans = 0, duplicates = 0, without_voucher = 0;
  int get_checked = 0, get_ok = 0;  // GetVoucher on a few
};

// Lists every voucher (with --report_all, one whose payment `t` did not
// find is an orphan), then looks a few up one by one.
VoucherAudit AuditVouchers(accounting::v1::AccountingService::Stub& stub, const PaymentSet& set,
                           const Tally& t);

}  // namespace outbox::demo
