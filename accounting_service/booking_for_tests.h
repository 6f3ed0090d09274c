#pragma once

// For tests of accounting.db: payments booked as the consumer books them,
// each event a PaymentCreated delivery through VoucherHandler (the library's
// inbox step and transaction) into the store, in one batch; and the
// consumer role as accounting_service runs it. Header-only.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "accounting_service/accounting_options.h"
#include "accounting_service/accounting_wiring.h"
#include "accounting_service/voucher_handler.h"
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

// accounting_service's options as its tests run it: PAY_QUEUE answered on
// ACC_QUEUE, unsigned messages accepted, no linger (a test steps the consumer).
inline AccountingServiceOptions TestServiceOptions() {
  AccountingServiceOptions options;
  options.service.pay_queue = "PAY_QUEUE";
  options.service.acc_queue = "ACC_QUEUE";
  options.consume_linger_ms = 0;
  return options;
}

// The consumer role with accounting_service's options (ConsumerOptionsOf)
// over `handler` and the test's fake broker links, on `clock`; driven by
// Step(). `keys`: the deployment's MESSAGE_KEYS_FILE, null as with
// --allow_unsigned_messages.
inline absl::StatusOr<std::unique_ptr<Consumer>> AccountingConsumer(
    VoucherHandler& handler, const Clock& clock, MetricsRegistry& metrics,
    std::unique_ptr<MessageConsumer> deliveries, std::unique_ptr<MessagePublisher> replies,
    const MessageKeys* keys = nullptr) {
  Consumer::Options options = ConsumerOptionsOf(TestServiceOptions(), metrics);
  options.signing = keys != nullptr ? Signing::With(*keys) : Signing::Unsigned();
  options.clock = &clock;
  return Consumer::Create(handler, std::move(options), std::move(deliveries), std::move(replies));
}

}  // namespace outbox::accounting
