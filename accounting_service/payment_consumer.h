#pragma once

// Consumes PAY_QUEUE: the library's idempotent consumer
// (shared/outbox/idempotent_consumer.h) with accounting's three parts:
// PaymentCreated decoded and checked against accounting's limits, the batch
// booked as vouchers in accounting.db, and the answers: one
// PaymentsAccounted per reply queue for publishers that accept batch
// replies, a PaymentAccounted each for the others.
#include <string>

#include "accounting_service/voucher_store.h"
#include "shared/base/clock.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/idempotent_consumer.h"
#include "shared/outbox/message_auth.h"
#include "shared/outbox/transport.h"

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

// Accounting's side of the consumer: decode, book, answer.
class VoucherHandler final : public MessageHandler<PaymentEvent> {
 public:
  VoucherHandler(VoucherLedger& ledger, const Clock& clock, BookingRules rules)
      : ledger_(ledger), clock_(clock), rules_(std::move(rules)) {}

  absl::StatusOr<PaymentEvent> Decode(const Delivery& delivery) override;
  // RejectReason under the rules. A payment booked before is answered as
  // booked whatever the rules say today (AppliedBefore); a new one refused
  // is answered with a reject, or dead-lettered for a publisher that does
  // not understand rejects.
  std::string Rejects(const PaymentEvent& event) override;
  bool AnswersRejects(const PaymentEvent& event) override { return event.rejects_accepted; }
  absl::StatusOr<std::vector<std::optional<std::string>>> AppliedBefore(
      const std::vector<PaymentEvent>& events) override {
    return ledger_.Booked(events);
  }
  absl::StatusOr<std::vector<Applied>> ApplyBatch(const std::vector<PaymentEvent>& batch) override;
  std::vector<Reply> Replies(const std::vector<Answered<PaymentEvent>>& batch) override;

 private:
  VoucherLedger& ledger_;
  const Clock& clock_;
  const BookingRules rules_;
};

class PaymentConsumer {
 public:
  PaymentConsumer(MessageConsumer& payments, MessagePublisher& replies, VoucherLedger& ledger,
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
