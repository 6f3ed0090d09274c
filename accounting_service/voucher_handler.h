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

  absl::StatusOr<PaymentEvent> Decode(const Delivery& delivery) override;
  std::string BusinessKey(const PaymentEvent& event) override { return event.payment_id; }
  // RejectReason under the rules, for a payment not booked before: answered
  // with a reject, or dead-lettered for a publisher that does not
  // understand rejects.
  std::string Rejects(const PaymentEvent& event) override;
  bool AnswersRejects(const PaymentEvent& event) override { return event.rejects_accepted; }
  absl::StatusOr<std::string> Apply(SQLite::Database& tx, const PaymentEvent& event) override {
    return store_.Book(tx, event);
  }
  std::vector<Reply> Replies(const std::vector<Answered<PaymentEvent>>& batch) override;

 private:
  VoucherStore& store_;
  const Clock& clock_;
  const BookingRules rules_;
};

}  // namespace outbox::accounting
