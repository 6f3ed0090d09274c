#pragma once

// Consumes PAY_QUEUE: the library's idempotent consumer
// (shared/outbox/idempotent_consumer.h) with accounting's three parts:
// PaymentCreated decoded and checked against accounting's limits, each new
// payment booked as a voucher in accounting.db (in the library's one
// transaction per batch, shared/sqlite/sqlite_message_handler.h), and the
// answers: one PaymentsAccounted per reply queue for publishers that accept
// batch replies, a PaymentAccounted each for the others.
#include <string>

#include "accounting_service/voucher_store.h"
#include "shared/base/clock.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/idempotent_consumer.h"
#include "shared/outbox/message_auth.h"
#include "shared/outbox/transport.h"
#include "shared/sqlite/sqlite_message_handler.h"

namespace outbox::accounting {

struct ConsumerOptions {
  std::string pay_queue = "PAY_QUEUE";  // for logs and metrics; `payments` reads it
  std::string acc_queue = "ACC_QUEUE";  // replies for messages without reply_to
  int prefetch = 256;
  absl::Duration linger = absl::ZeroDuration();  // outbox::ConsumerOptions::linger
  int linger_batch = 4;                          // and linger_batch
  absl::Duration confirm_timeout = absl::Seconds(5);
  BookingRules rules;  // what is booked; the rest is rejected (or dead-lettered)
  // Events must be signed by one of these keys; null = unsigned accepted.
  // (Replies are signed by the publisher given, a SigningPublisher.)
  const MessageKeys* keys = nullptr;
};

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

class PaymentConsumer {
 public:
  PaymentConsumer(MessageConsumer& payments, MessagePublisher& replies, VoucherStore& store,
                  const Clock& clock, MetricsRegistry& metrics, ConsumerOptions options);

  void Start() { consumer_.Start(); }
  void Stop() { consumer_.Stop(); }         // finishes the batch in hand and its replies' confirms
  bool Step() { return consumer_.Step(); }  // one turn; tests call it directly

  int64_t applied() const { return consumer_.booked(); }
  int64_t lingers() const { return consumer_.lingers(); }
  int64_t duplicates() const { return consumer_.duplicates(); }
  int64_t dead_lettered() const { return consumer_.dead_lettered(); }
  int64_t unauthenticated() const { return consumer_.unauthenticated(); }
  int64_t requeued() const { return consumer_.requeued(); }

 private:
  VoucherHandler handler_;
  IdempotentConsumer consumer_;
};

}  // namespace outbox::accounting
