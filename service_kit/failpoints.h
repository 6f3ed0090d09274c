#pragma once

// The crash points the services define (docs/testing.md, Crash points);
// evaluated with Failpoint() (shared/runtime/internal/failpoint.h) or handed to the
// library's workers by name.
#include "shared/runtime/internal/failpoint.h"

namespace outbox {

inline constexpr char kFpPaymentBeforeCommit[] = "payment.before_commit";
inline constexpr char kFpPaymentAfterCommitBeforePublish[] = "payment.after_commit_before_publish";
inline constexpr char kFpPaymentAfterPublishBeforeReply[] = "payment.after_publish_before_reply";
inline constexpr char kFpPaymentReplyBeforeRecordAcks[] = "payment.reply_before_record_acks";
inline constexpr char kFpAccountingAfterCommitBeforeReply[] =
    "accounting.after_commit_before_reply";
inline constexpr char kFpAccountingAfterReplyBeforeAck[] = "accounting.after_reply_before_ack";

}  // namespace outbox
