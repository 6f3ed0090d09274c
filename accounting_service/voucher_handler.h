#pragma once

// Accounting's domain on the library's consumer role (shared/roles/consumer.h):
// PaymentCreated decoded and checked against accounting's limits, each new
// payment booked as a voucher in accounting.db (in the library's one
// transaction per batch, shared/sqlite/sqlite_message_handler.h), and the
// answers: one PaymentsAccounted per reply queue for publishers that accept
// batch replies, a PaymentAccounted each for the others.
#include <string>
#include <utility>
#include <vector>

#include "accounting_service/voucher_store.h"
#include "shared/base/clock.h"
#include "shared/outbox/consumer_handler.h"
#include "shared/outbox/transport.h"
#include "shared/sqlite/sqlite_message_handler.h"

namespace outbox::accounting {

// The steps every store's handler shares (VoucherHandler here,
// PgVoucherHandler in pg_voucher_store.h): a PaymentCreated delivery
// decoded (the booking rules are applied after the inbox, by Rejects), and
// the batch's answers.
absl::StatusOr<PaymentEvent> DecodePaymentDelivery(const Delivery& delivery);
std::vector<Reply> AccountingReplies(const std::vector<Answered<PaymentEvent>>& batch,
                                     int64_t now_ms);

// Accounting's side of the consumer: decode, book, answer. The library
// looks each payment up first (its message id in processed_messages, its
// payment in vouchers): one booked before is answered as booked, whatever
// the rules say today.
class VoucherHandler final : public SqliteMessageHandler<PaymentEvent> {
 public:
  VoucherHandler(VoucherStore& store, const Clock& clock, BookingRules rules)
      : SqliteMessageHandler(store.file(), clock, {kInbox, kVouchersByPayment}),
        store_(store),
        clock_(clock),
        rules_(std::move(rules)) {}

  absl::StatusOr<PaymentEvent> Decode(const Delivery& delivery) override {
    return DecodePaymentDelivery(delivery);
  }
  std::string BusinessKey(const PaymentEvent& event) override { return event.payment_id; }
  // RejectReason under the rules, for a payment not booked before: answered
  // with a reject, or dead-lettered for a publisher that does not
  // understand rejects.
  std::string Rejects(const PaymentEvent& event) override { return RejectReason(event, rules_); }
  bool AnswersRejects(const PaymentEvent& event) override { return event.rejects_accepted; }
  absl::StatusOr<std::string> Apply(SQLite::Database& tx, const PaymentEvent& event) override {
    return store_.Book(tx, event);
  }
  std::vector<Reply> Replies(const std::vector<Answered<PaymentEvent>>& batch) override {
    return AccountingReplies(batch, clock_.NowMillis());
  }

 private:
  VoucherStore& store_;
  const Clock& clock_;
  const BookingRules rules_;
};

}  // namespace outbox::accounting
