#include "tools/demo/payment_set.h"

#include <algorithm>
#include <cstdio>

#include "client/listing.h"

namespace outbox::demo {

Expected FromRequest(const payment::v1::CreatePaymentRequest& r) {
  return {true, r.payer_account(), r.payee_account(), r.currency(), r.amount_minor()};
}

Expected FromPayment(const payment::v1::Payment& p) {
  return {true, p.payer_account(), p.payee_account(), p.currency(), p.amount_minor()};
}

bool VoucherMatches(const accounting::v1::Voucher& v, const Expected& e) {
  return e.known && v.debit_account() == e.payer && v.credit_account() == e.payee &&
         v.amount_minor() == e.amount_minor && v.currency() == e.currency;
}

PaymentSet BuildSet(const Config& c, const std::vector<client::Created>& created) {
  PaymentSet set;
  set.all = c.report_all;
  for (const client::Created& r : created) {
    if (r.payment_id.empty()) continue;
    set.expected.emplace(r.payment_id, FromRequest(r.request));
    set.acked.insert(r.payment_id);
  }
  for (const std::string& id : c.expected_ids) {
    if (set.acked.insert(id).second) {
      ++set.expected_new;
      set.expected.emplace(id, Expected{});
    }
  }
  return set;
}

std::string SetName(const Config& c, const PaymentSet& set) {
  return c.report_all           ? "all payments in payment.db"
         : !c.creating          ? "payments of --expect_ids"
         : set.expected_new > 0 ? "this run's payments + --expect_ids"
                                : "this run's payments";
}

bool ListWithRetries(const std::function<void()>& reset,
                     const std::function<absl::Status()>& list) {
  for (int attempt = 1; attempt <= kListAttempts; ++attempt) {
    reset();
    absl::Status s = list();
    if (s.ok()) return true;
    std::fprintf(stderr, "outbox_demo: list failed: %s\n", std::string(s.message()).c_str());
    if (attempt < kListAttempts) absl::SleepFor(absl::Seconds(1));
  }
  return false;
}

void Tally::Add(const payment::v1::Payment& p) {
  ++seen;
  in_db.insert(p.payment_id());
  switch (p.outbox().status()) {
    case payment::v1::SENT:
      ++sent;
      newest_sent_at =
          std::max(newest_sent_at, absl::FromUnixSeconds(p.outbox().sent_at().seconds()) +
                                       absl::Nanoseconds(p.outbox().sent_at().nanos()));
      break;
    case payment::v1::SENDING: ++sending; break;
    case payment::v1::FAILED: ++failed; break;
    default: break;
  }
  if (p.outbox().attempts() > 1) ++retried;
  max_attempts = std::max(max_attempts, p.outbox().attempts());
}

int64_t Tally::Missing(const PaymentSet& set) const {
  int64_t n = 0;
  for (const std::string& id : set.acked) n += in_db.count(id) == 0 ? 1 : 0;
  return n;
}

bool TallySet(payment::v1::PaymentService::StubInterface& stub, PaymentSet& set, Tally* t) {
  auto list = [&] {
    return client::ForEachPayment(stub, payment::v1::OUTBOX_STATUS_UNSPECIFIED, kCallTimeout,
                                  [&](const payment::v1::Payment& p) {
                                    if (!set.Contains(p.payment_id())) return;
                                    Expected& e = set.expected[p.payment_id()];
                                    if (!e.known) e = FromPayment(p);
                                    t->Add(p);
                                  });
  };
  return ListWithRetries([&] { *t = Tally{}; }, list);
}

}  // namespace outbox::demo
