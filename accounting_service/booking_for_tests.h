#pragma once

// For tests of accounting.db: payments booked as the consumer books them,
// each event a PaymentCreated delivery through VoucherHandler (the library's
// inbox step and transaction) into the store, in one batch. Header-only.
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "accounting_service/payment_consumer.h"
#include "accounting_service/voucher_store.h"
#include "events/v1/events.pb.h"
#include "shared/base/status_macros.h"

namespace outbox::accounting {

// `e` as payment_service publishes it.
inline Delivery PaymentCreatedDelivery(const PaymentEvent& e) {
  events::v1::PaymentCreated m;
  m.set_message_id(e.message_id);
  m.set_payment_id(e.payment_id);
  m.set_payer_account(e.payer_account);
  m.set_payee_account(e.payee_account);
  m.set_amount_minor(e.amount_minor);
  m.set_currency(e.currency);
  m.set_batch_replies_accepted(e.batch_replies_accepted);
  m.set_rejects_accepted(e.rejects_accepted);
  Delivery d;
  d.message_id = e.message_id;
  d.reply_to = "ACC_QUEUE";
  d.type = "PaymentCreated";
  d.traceparent = e.traceparent;
  d.body = m.SerializeAsString();
  return d;
}

// Books `events` as one batch; what each became: a new voucher, or a
// duplicate with the voucher booked before (Applied::reference).
inline absl::StatusOr<std::vector<Applied>> BookEvents(VoucherStore& store, const Clock& clock,
                                                       const std::vector<PaymentEvent>& events,
                                                       BookingRules rules = {}) {
  VoucherHandler handler(store, clock, std::move(rules));
  std::vector<Delivery> deliveries;
  for (const PaymentEvent& e : events) deliveries.push_back(PaymentCreatedDelivery(e));
  ConsumerHandler& batch = handler;
  batch.Clear();
  for (const Delivery& d : deliveries) RETURN_IF_ERROR(batch.Add(d));
  return batch.ApplyBatch();
}

}  // namespace outbox::accounting
