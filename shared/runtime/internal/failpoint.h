#pragma once

// Named fault-injection points for crash tests. Inert unless the environment
// variable OUTBOX_FAILPOINTS names them, e.g.
//   OUTBOX_FAILPOINTS="orders.after_commit_before_publish=crash"
//   OUTBOX_FAILPOINTS="shipping.after_reply_before_ack=crash@3"   (3rd hit)
// Several entries are separated by ';' or ','. `crash` kills the process at
// once with SIGKILL: no destructors, no flushing, like a power cut.
#include "absl/strings/string_view.h"

namespace outbox {

// The library's own point; the others are named by their callers (the
// relay's, the ack listener's and the consumer's options).
inline constexpr char kFpRecoveryAfterClaimBeforePublish[] = "recovery.after_claim_before_publish";

// Evaluates the point: returns normally unless it is armed and due.
void Failpoint(absl::string_view name);

}  // namespace outbox
