#pragma once

// What a run prints at its end: with --wait_sent=false a one-line snapshot
// of the set, otherwise the report scripts/demo.sh and scripts/chaos.sh read.
#include <string>

#include "absl/time/time.h"
#include "payment/v1/payment.grpc.pb.h"
#include "tools/demo/api_checks.h"
#include "tools/demo/create_payments.h"
#include "tools/demo/demo_config.h"
#include "tools/demo/payment_set.h"
#include "tools/demo/voucher_audit.h"

namespace outbox::demo {

// --wait_sent=false: what was created (if anything), then one line about the
// set's outbox. The exit status.
int PrintSnapshot(const Config& c, const CreatePhase& create, const Checks& checks, bool create_ok,
                  payment::v1::PaymentService::StubInterface& stub, PaymentSet& set);

// Everything the final report says.
struct Outcome {
  std::string run_id;
  absl::Time program_start, start;
  absl::Time drained_at = absl::InfiniteFuture();  // none of the set SENDING any more
  bool create_ok = false, listed = false;
  Tally tally;
  VoucherAudit vouchers;
};

// Prints the report; true if all is well.
bool PrintReport(const Config& c, const CreatePhase& create, const Checks& checks,
                 const PaymentSet& set, const Outcome& o);

}  // namespace outbox::demo
