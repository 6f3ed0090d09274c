#pragma once

// The set a run reports on (this run's payments, --expect_ids, or with
// --report_all every payment), what each one's voucher must say, and the
// tally of their outbox states as payment_service lists them.
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "accounting/v1/accounting.grpc.pb.h"
#include "client/create_load.h"
#include "payment/v1/payment.grpc.pb.h"
#include "tools/demo/demo_config.h"

namespace outbox::demo {

// What a payment's voucher must say.
struct Expected {
  bool known = false;  // false: not listed yet (an --expect_ids id)
  std::string payer, payee, currency;
  int64_t amount_minor = 0;
};

Expected FromRequest(const payment::v1::CreatePaymentRequest& r);
Expected FromPayment(const payment::v1::Payment& p);
bool VoucherMatches(const accounting::v1::Voucher& v, const Expected& e);

// payment_id -> what its voucher must say. `acked` are the ids a client was
// given (here or in --expect_ids): each must be in payment.db.
struct PaymentSet {
  bool all = false;  // --report_all: every payment in payment.db
  std::unordered_map<std::string, Expected> expected;
  std::unordered_set<std::string> acked;
  int64_t expected_new = 0;  // --expect_ids not created by this run

  bool Contains(const std::string& id) const { return all || expected.count(id) != 0; }
};

PaymentSet BuildSet(const Config& c, const std::vector<client::Created>& created);

// How the report names the set.
std::string SetName(const Config& c, const PaymentSet& set);

// Runs a whole listing (`reset` then `list`) up to kListAttempts times, so a
// service that is just restarting does not spoil the report.
bool ListWithRetries(const std::function<void()>& reset, const std::function<absl::Status()>& list);

// Outbox tally of the set.
struct Tally {
  int64_t seen = 0, sent = 0, sending = 0, failed = 0, retried = 0;
  int max_attempts = 0;
  absl::Time newest_sent_at = absl::InfinitePast();
  std::unordered_set<std::string> in_db;  // ids of the set found in payment.db

  void Add(const payment::v1::Payment& p);
  // Ids acknowledged to a client that payment.db does not have.
  int64_t Missing(const PaymentSet& set) const;
};

// Lists every payment and tallies the set's; also learns what an
// --expect_ids payment's voucher must say.
bool TallySet(payment::v1::PaymentService::StubInterface& stub, PaymentSet& set, Tally* t);

}  // namespace outbox::demo
