#pragma once

// Accounting's ledger in PostgreSQL, chosen when --accounting_db is a
// postgresql:// URI (IsPgConninfo): the tables of accounting.db
// (voucher_store.h) with the same columns and rules, in accounting's own
// versioned schema (AccountingPgSchema), and the consumer's handler on the
// library's PgMessageHandler. Several accounting_service processes may book
// on one database: they share its inbox, and two copies of one message
// given to two of them at once book one voucher.
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "accounting_service/voucher.h"
#include "accounting_service/voucher_handler.h"
#include "accounting_service/voucher_reads.h"
#include "shared/base/clock.h"
#include "shared/base/internal/ids.h"
#include "shared/postgres/pg_message_handler.h"
#include "shared/postgres/pg_schema.h"
#include "shared/postgres/pg_session.h"

namespace outbox::accounting {

// Schema "accounting": version 1 makes vouchers (payment_id unique) and the
// inbox processed_messages (CreatePgInboxTable).
const PgSchema& AccountingPgSchema();

// The handler's options: the inbox, and vouchers found by payment
// (kVouchersByPayment): a payment booked under another message id, or
// whose message id was pruned, is answered with its voucher.
PgHandlerOptions AccountingPgHandlerOptions();

class PgVoucherStore final : public VoucherReads {
 public:
  // Connects to `conninfo` and upgrades the database to
  // AccountingPgSchema(); FAILED_PRECONDITION, untouched, for a newer one.
  // Errors never hold the password (RedactConninfo).
  static absl::StatusOr<std::unique_ptr<PgVoucherStore>> Open(const std::string& conninfo,
                                                              IdGenerator& ids, const Clock& clock);

  // The session the handler books on (one per handler) and the reads use.
  PgSession& session() { return *session_; }
  // Inserts `event`'s voucher inside the handler's transaction `tx`; returns
  // its id. Another process that booked the same payment under another
  // message id and committed first: that voucher's id, nothing inserted.
  absl::StatusOr<std::string> Book(PgConnection& tx, const PaymentEvent& event);
  // Book for several events, in their order, in one INSERT (and one SELECT
  // for the payments booked already): their voucher ids, in that order.
  absl::StatusOr<std::vector<std::string>> BookAll(PgConnection& tx,
                                                   const std::vector<const PaymentEvent*>& events);

  absl::StatusOr<Voucher> GetByPayment(const std::string& payment_id) override;
  absl::StatusOr<VoucherPage> List(int64_t after_id, int limit) override;

 private:
  PgVoucherStore(std::unique_ptr<PgSession> session, std::unique_ptr<PgSession> reads,
                 IdGenerator& ids, const Clock& clock)
      : session_(std::move(session)), reads_(std::move(reads)), ids_(ids), clock_(clock) {}

  std::unique_ptr<PgSession> session_;  // the handler's batches
  std::unique_ptr<PgSession> reads_;    // the gRPC API's, not queued behind a batch
  IdGenerator& ids_;
  const Clock& clock_;
};

// VoucherHandler's counterpart on PostgreSQL: the same decoding, rules and
// answers (voucher_handler.h), booked through PgMessageHandler.
class PgVoucherHandler final : public PgMessageHandler<PaymentEvent> {
 public:
  PgVoucherHandler(PgVoucherStore& store, const Clock& clock, BookingRules rules)
      : PgMessageHandler(store.session(), clock, AccountingPgHandlerOptions()),
        store_(store),
        clock_(clock),
        rules_(std::move(rules)) {}

  absl::StatusOr<PaymentEvent> Decode(const Delivery& delivery) override {
    return DecodePaymentDelivery(delivery);
  }
  std::string BusinessKey(const PaymentEvent& event) override { return event.payment_id; }
  std::string Rejects(const PaymentEvent& event) override { return RejectReason(event, rules_); }
  bool AnswersRejects(const PaymentEvent& event) override { return event.rejects_accepted; }
  absl::StatusOr<std::string> Apply(PgConnection& tx, const PaymentEvent& event) override {
    return store_.Book(tx, event);
  }
  absl::StatusOr<std::vector<std::string>> ApplyAll(
      PgConnection& tx, const std::vector<const PaymentEvent*>& events) override {
    return store_.BookAll(tx, events);
  }
  std::vector<Reply> Replies(const std::vector<Answered<PaymentEvent>>& batch) override {
    return AccountingReplies(batch, clock_.NowMillis());
  }

 private:
  PgVoucherStore& store_;
  const Clock& clock_;
  const BookingRules rules_;
};

}  // namespace outbox::accounting
