#pragma once

// payment.db: the payments table, written with its outbox row by the
// producer (shared/roles/producer.h), and the reads of payment_service.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "payment_service/payment.h"
#include "shared/base/clock.h"
#include "shared/base/internal/ids.h"
#include "shared/base/internal/mutex.h"
#include "shared/base/internal/page.h"
#include "shared/observability/metrics.h"
#include "shared/roles/producer.h"
#include "shared/sqlite/sqlite_file.h"

namespace outbox::payment {

// The outcome of one CreatePayment.
struct CreateOutcome {
  absl::Status status;  // ALREADY_EXISTS for a reused key with another request
  PaymentRecord record;
  bool replayed = false;  // the key was seen before with the same request
};

// A new payment with everything its business write needs already decided.
struct NewPayment {
  PaymentInput input;
  std::string payment_id;
  int64_t created_at = 0;  // unix ms, as in its PaymentCreated event
};

using PaymentPage = Page<PaymentRecord>;

// The reads of payment_service, whichever store holds the payments: this
// SQLite file (PaymentStore) or a PostgreSQL database (PgPaymentStore,
// payment_pg_store.h).
class PaymentReads {
 public:
  virtual ~PaymentReads() = default;
  // NOT_FOUND naming the id.
  virtual absl::StatusOr<PaymentRecord> Get(const std::string& payment_id) = 0;
  // Payments after row id `after_id` in id order, with their outbox rows'
  // state; `status` filters by it.
  virtual absl::StatusOr<PaymentPage> List(std::optional<OutboxStatus> status, int64_t after_id,
                                           int limit) = 0;
};

struct PaymentStatements;  // payment_store.cc

class PaymentStore final : public PaymentReads {
 public:
  ~PaymentStore() override;
  // Creates payment.db or upgrades it to the latest schema version
  // (PaymentDbSchema); FAILED_PRECONDITION, untouched, for a newer file.
  static absl::StatusOr<std::unique_ptr<PaymentStore>> Open(const std::string& path,
                                                            const DbOptions& options);

  // The file, whose outbox tables the producer (shared/roles/producer.h) writes.
  SqliteFile& file() { return *db_; }

  // The business write of one CreatePayment (a BusinessWrite of the
  // producer's group, shared/sqlite/internal/group_writer.h): inserts the payments
  // row, or resolves the request against an earlier one with the same
  // idempotency key (written before, or earlier in the same group). `out`
  // starts over on each run: on an insert its record holds the row id; on
  // the same request it is a replay of the earlier record and the write
  // returns kReplayed (nothing of it is written); a different request
  // returns ALREADY_EXISTS naming the key.
  absl::Status WritePayment(SQLite::Database& db, const NewPayment& payment, CreateOutcome& out);

  absl::StatusOr<PaymentRecord> Get(const std::string& payment_id) override;
  absl::StatusOr<PaymentPage> List(std::optional<OutboxStatus> status, int64_t after_id,
                                   int limit) override;

  // The file's log length and skipped checkpoints (sqlite_metrics.h), db="payment".
  void RegisterMetrics(MetricsRegistry& metrics) const;

 private:
  explicit PaymentStore(std::unique_ptr<SqliteFile> db);

  std::unique_ptr<SqliteFile> db_;
  // WritePayment's statements on the writer connection, prepared once (used
  // only on the producer's writer thread): no SQL text is parsed per write.
  std::unique_ptr<PaymentStatements> statements_;
};

// What WritePayment returns for a replay: the producer rolls the write back
// and the completion answers with the earlier record.
inline constexpr char kReplayed[] = "payment: replay of an earlier request";

// CreatePayment on the producer: a payment's id, its PaymentCreated event
// and its outbox row, written with the payments row in the producer's next
// group commit. The store is the queue function's: SQLite's here,
// PostgreSQL's in payment_pg_store.h.
class PaymentCreator {
 public:
  // Queues one payment's business write (its payments row, written by the
  // store into `outcome`) with the outbox row of `spec`: Producer's
  // WriteAsync on SQLite, PgProducer's on PostgreSQL.
  using QueueFn =
      std::function<void(MessageSpec spec, std::shared_ptr<const NewPayment> payment,
                         std::shared_ptr<CreateOutcome> outcome, GroupWriter::WriteDone done)>;
  // How a write is queued on SQLite: Producer::WriteAsync, or a GroupWriter's.
  using WriteAsyncFn = std::function<void(MessageSpec, BusinessWrite, GroupWriter::WriteDone)>;
  // All outlive this; `ids` is called from the callers' threads.
  PaymentCreator(Producer& producer, PaymentStore& store, IdGenerator& ids, const Clock& clock)
      : PaymentCreator(
            [&producer](MessageSpec spec, BusinessWrite business, GroupWriter::WriteDone done) {
              producer.WriteAsync(std::move(spec), std::move(business), std::move(done));
            },
            store, ids, clock) {}
  PaymentCreator(WriteAsyncFn write, PaymentStore& store, IdGenerator& ids, const Clock& clock);
  PaymentCreator(QueueFn queue, IdGenerator& ids, const Clock& clock)
      : queue_(std::move(queue)), ids_(ids), clock_(clock) {}

  // Runs once the request's group is committed (or failed), with its outcome.
  using CreateDone = absl::AnyInvocable<void(CreateOutcome) &&>;
  // Queues the request and returns at once. `done` runs on the producer's
  // writer thread right after the commit (keep it short: every caller of
  // the group waits behind it), or here at once when the producer is
  // stopping (UNAVAILABLE). `traceparent` (W3C) goes with the outbox row
  // and its message.
  void CreateAsync(PaymentInput input, std::string traceparent, CreateDone done);
  // The same, blocking until the outcome is there.
  CreateOutcome Create(const PaymentInput& input, const std::string& traceparent = "");

 private:
  const QueueFn queue_;
  IdGenerator& ids_;
  const Clock& clock_;
};

}  // namespace outbox::payment
