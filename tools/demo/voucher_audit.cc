#include "tools/demo/voucher_audit.h"

#include <string>
#include <unordered_map>

#include "client/channel.h"
#include "client/listing.h"
#include "tools/demo/demo_config.h"

namespace outbox::demo {
namespace {

// Counts each voucher of the set against its payment; `per_payment` gets
// how many each payment has.
bool ListVouchers(accounting::v1::AccountingService::Stub& stub, const PaymentSet& set,
                  const Tally& t, VoucherAudit& a,
                  std::unordered_map<std::string, int>& per_payment) {
  return ListWithRetries(
      [&] {
        per_payment.clear();
        a.vouchers = a.mismatched = a.orphans = 0;
      },
      [&] {
        return client::ForEachVoucher(stub, kCallTimeout, [&](const accounting::v1::Voucher& v) {
          auto it = set.expected.find(v.payment_id());
          if (it == set.expected.end() || (set.all && t.in_db.count(v.payment_id()) == 0)) {
            if (set.all) ++a.orphans;  // a voucher whose payment does not exist
            return;
          }
          ++a.vouchers;
          ++per_payment[v.payment_id()];
          if (!VoucherMatches(v, it->second)) ++a.mismatched;
        });
      });
}

// GetVoucher on a few, to exercise the point lookup too.
void GetSomeVouchers(accounting::v1::AccountingService::Stub& stub, const PaymentSet& set,
                     const Tally& t, VoucherAudit& a) {
  for (const std::string& id : t.in_db) {
    if (a.get_checked == kMaxReplays) break;
    ++a.get_checked;
    grpc::ClientContext ctx;
    client::SetTimeout(&ctx, kCallTimeout);
    accounting::v1::GetVoucherRequest req;
    req.set_payment_id(id);
    accounting::v1::Voucher v;
    auto e = set.expected.find(id);
    if (stub.GetVoucher(&ctx, req, &v).ok() && v.payment_id() == id && e != set.expected.end() &&
        VoucherMatches(v, e->second)) {
      ++a.get_ok;
    }
  }
}

}  // namespace

VoucherAudit AuditVouchers(accounting::v1::AccountingService::Stub& stub, const PaymentSet& set,
                           const Tally& t) {
  VoucherAudit a;
  std::unordered_map<std::string, int> vouchers_per_payment;
  a.listed = ListVouchers(stub, set, t, a, vouchers_per_payment);
  for (const std::string& id : t.in_db) {
    auto it = vouchers_per_payment.find(id);
    const int n = it == vouchers_per_payment.end() ? 0 : it->second;
    if (n > 1) ++a.duplicates;
    if (n == 0) ++a.without_voucher;
  }
  GetSomeVouchers(stub, set, t, a);
  return a;
}

}  // namespace outbox::demo
