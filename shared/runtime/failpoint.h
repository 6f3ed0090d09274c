#pragma once

// Named fault-injection points for crash tests. Inert unless the environment
// variable OUTBOX_FAILPOINTS names them, e.g.
//   OUTBOX_FAILPOINTS="payment.after_commit_before_publish=crash"
//   OUTBOX_FAILPOINTS="accounting.after_reply_before_ack=crash@3"   (3rd hit)
// Several entries are separated by ';' or ','. `crash` kills the process at
// once with SIGKILL: no destructors, no flushing, like a power cut.
#include "absl/strings/string_view.h"

namespace outbox {

// The points the services define (see docs/testing.md, Crash points).
inline constexpr char kFpPaymentBeforeCommit[] = "payment.before_commit";
inline constexpr char kFpPaymentAfterCommitBeforePublish[] = "payment.after_commit_before_publish";
inline constexpr char kFpPaymentAfterPublishBeforeReply[] = "payment.after_publish_before_reply";
inline constexpr char kFpPaymentReplyBeforeRecordAcks[] = "payment.reply_before_record_acks";
inline constexpr char kFpAccountingAfterCommitBeforeReply[] =
    "accounting.after_commit_before_reply";
inline constexpr char kFpAccountingAfterReplyBeforeAck[] = "accounting.after_reply_before_ack";
inline constexpr char kFpRecoveryAfterClaimBeforePublish[] = "recovery.after_claim_before_publish";

// Evaluates the point: returns normally unless it is armed and due.
void Failpoint(absl::string_view name);

}  // namespace outbox
