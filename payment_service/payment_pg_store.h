#pragma once

// The payments on PostgreSQL: the payments table in payment's own versioned
// schema (PaymentPgSchema) beside the library's outbox tables
// (PgOutboxSchema) in one database, written with its outbox row by
// PgProducer (shared/postgres/pg_producer.h), and the reads of
// payment_service. PaymentStore (payment_store.h) is the same on SQLite.
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "payment_service/payment_store.h"
#include "shared/postgres/pg_producer.h"
#include "shared/postgres/pg_schema.h"
#include "shared/postgres/pg_session.h"

namespace outbox::payment {

// payment's schema in the database ("payment" in schema_version):
// 1  payments (its row id the paging cursor, idempotency_key unique)
const PgSchema& PaymentPgSchema();

class PgPaymentStore final : public PaymentReads {
 public:
  // Connects to `conninfo` (PgSession::Open's errors) and brings the
  // library's outbox schema and payment's to their latest versions. A
  // database newer than either is FAILED_PRECONDITION, with nothing changed.
  static absl::StatusOr<std::unique_ptr<PgPaymentStore>> Open(absl::string_view conninfo);

  // The business write of one CreatePayment (a PgBusinessWrite of
  // PgProducer's group commit, shared/postgres/internal/pg_group_writer.h), SQLite's
  // PaymentStore::WritePayment on PostgreSQL: inserts the payments row
  // unless its idempotency key is taken, and otherwise resolves the request
  // against the earlier one. A key taken by a transaction still open (another
  // process's group) waits for it, so that a key is one payment
  // database-wide. `out` starts over on each run: on an insert its record
  // holds the row id; on the same request it is a replay of the earlier
  // record and the write returns kReplayed; a different request, or an
  // earlier one of the same group (its outbox row not written yet), returns
  // ALREADY_EXISTS naming the key.
  static absl::Status WritePayment(PgConnection& conn, const NewPayment& payment,
                                   CreateOutcome& out);

  // On the store's own connection, one read at a time.
  absl::StatusOr<PaymentRecord> Get(const std::string& payment_id) override;
  absl::StatusOr<PaymentPage> List(std::optional<OutboxStatus> status, int64_t after_id,
                                   int limit) override;

  // The connection string without its password, for logs.
  const std::string& redacted() const { return session_->redacted(); }

 private:
  explicit PgPaymentStore(std::unique_ptr<PgSession> session) : session_(std::move(session)) {}

  std::unique_ptr<PgSession> session_;
};

// PaymentCreator on PgProducer: each payment's row written by
// PgPaymentStore::WritePayment in the producer's next group commit. All
// outlive the creator.
PaymentCreator PgPaymentCreator(PgProducer& producer, IdGenerator& ids, const Clock& clock);

}  // namespace outbox::payment
