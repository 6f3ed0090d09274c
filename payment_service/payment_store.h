#pragma once

// payment.db: the payments table and the outbox table, written together.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "payment_service/payment.h"
#include "shared/base/mutex.h"
#include "shared/base/page.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/repository.h"
#include "shared/sqlite/sqlite_file.h"

namespace outbox::payment {

// What the writer decided for one request of a group.
struct CreateOutcome {
  absl::Status status;  // ALREADY_EXISTS for a reused key with another request
  PaymentRecord record;
  bool replayed = false;  // the key was seen before with the same request
};

// A new payment with everything the transaction needs already decided.
struct NewPayment {
  PaymentInput input;
  std::string payment_id;
  OutboxMessage outbox;  // from NewOutboxMessage
};

using PaymentPage = Page<PaymentRecord>;

struct GroupStatements;  // payment_store.cc

class PaymentStore final {
 public:
  ~PaymentStore();
  // Creates payment.db or upgrades it to the latest schema version
  // (PaymentDbSchema); FAILED_PRECONDITION, untouched, for a newer file.
  static absl::StatusOr<std::unique_ptr<PaymentStore>> Open(const std::string& path,
                                                            const DbOptions& options);

  // Writes the whole group in ONE transaction. Each payment is inserted with
  // its outbox row, or resolved against an existing idempotency key, under
  // its own savepoint, so one failing request fails alone. In the same
  // transaction, acknowledged rows in `acks` turn SENT (their count goes
  // to *acked). If the commit itself fails, every outcome carries that error.
  std::vector<CreateOutcome> CommitGroup(const std::vector<NewPayment>& batch,
                                         const std::vector<std::string>& acks, int64_t now_ms,
                                         absl::StatusOr<AckTally>* acked);
  std::vector<CreateOutcome> CreateBatch(const std::vector<NewPayment>& batch) {
    return CommitGroup(batch, {}, 0, nullptr);
  }

  // Marks acknowledged outbox rows SENT in one transaction (a group of acks only).
  absl::StatusOr<AckTally> RecordAcks(const std::vector<std::string>& message_ids, int64_t now_ms);

  // Notes why a publish failed on SENDING rows (shown by GetPayment), in a
  // transaction of its own.
  absl::Status RecordPublishFailure(const std::vector<std::string>& message_ids,
                                    const std::string& error, int64_t now_ms);

  // Closes rejected rows FAILED (OnReject), in a transaction of its own:
  // rejects are rare and need not wait for a group.
  absl::StatusOr<int> RecordRejects(const std::vector<Rejection>& rejects, int64_t now_ms);

  // SENDING rows (published or not, awaiting accounting's reply), counted
  // up to `limit` (the count stops there, so it stays cheap in an outage).
  absl::StatusOr<int64_t> CountSending(int64_t limit);
  // See OutboxRepository::TakenOver.
  absl::StatusOr<std::vector<std::string>> TakenOver(const std::vector<std::string>& message_ids);

  absl::StatusOr<PaymentRecord> Get(const std::string& payment_id);
  absl::StatusOr<PaymentPage> List(std::optional<OutboxStatus> status, int64_t after_id, int limit);

  // The file's log length and skipped checkpoints (sqlite_metrics.h), db="payment".
  void RegisterMetrics(MetricsRegistry& metrics) const;

 private:
  explicit PaymentStore(std::unique_ptr<SqliteFile> db);

  std::unique_ptr<SqliteFile> db_;
  // The group commit's statements on the writer connection, prepared once
  // (used only inside SqliteFile::WithWriter): no SQL text is parsed per group.
  std::unique_ptr<GroupStatements> group_;
};

}  // namespace outbox::payment
