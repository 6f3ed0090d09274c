#pragma once

// payment.db's schema versions: the payments table, the outbox with its
// archive, and recovery's lease. payment_service creates and upgrades the
// file; recovery_service opens it only at the latest version and never
// changes the schema (see RecoveryStore::Open).
#include "shared/sqlite/internal/recovery_store.h"
#include "shared/sqlite/schema.h"

namespace outbox {

// 1  payments, outbox (+ index on status, next_retry_at), recovery_lease
// 2  outbox_archive, and the index on SENT rows' sent_at that retention walks
// 3  message_type and reply_to on outbox and outbox_archive
// 4  traceparent on outbox and outbox_archive
// 5  failure_kind, failure_group, acknowledged_by; outbox_history, outbox_audit
// 6  outbox_archive_sent_at, outbox_audit_at (the indexes retention deletes
//    by) and outbox_retention (its watermarks)
// 7  restarted_at on outbox and outbox_archive, reason on outbox_audit
const DbSchema& PaymentDbSchema();

// payment.db as recovery opens it: made and upgraded by payment_service,
// named by PAYMENT_DB, its metrics labelled db="payment".
inline ProducerDb PaymentProducerDb() {
  return {&PaymentDbSchema(), "payment_service", "PAYMENT_DB", "payment", "payment database"};
}

}  // namespace outbox
