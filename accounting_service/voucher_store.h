#pragma once

// accounting.db: vouchers and the ids of processed messages. The consumer's
// handler (voucher_handler.h) books each batch's vouchers through the
// library's SqliteMessageHandler, which records each message id with its
// voucher in the same transaction, so a message is applied at most once.
#include <memory>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include "absl/status/statusor.h"
#include "accounting_service/voucher.h"
#include "accounting_service/voucher_reads.h"
#include "shared/base/clock.h"
#include "shared/base/internal/ids.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/internal/inbox_pruner.h"
#include "shared/sqlite/inbox.h"
#include "shared/sqlite/sqlite_file.h"
#include "shared/sqlite/sqlite_message_handler.h"

namespace outbox::accounting {

// accounting.db's inbox: processed_messages, by payment and voucher.
inline const InboxTable kInbox{"processed_messages", "payment_id", "voucher_id"};
// Vouchers are kept for good: a payment booked under another message id, or
// whose message id was pruned from the inbox, is found here by payment.
inline const AppliedByKey kVouchersByPayment{"vouchers", "payment_id", "voucher_id"};

class VoucherStore final : public ProcessedLog, public VoucherReads {
 public:
  // Creates accounting.db or upgrades it to the latest schema version
  // (AccountingDbSchema); FAILED_PRECONDITION, untouched, for a newer file.
  static absl::StatusOr<std::unique_ptr<VoucherStore>> Open(const std::string& path,
                                                            const DbOptions& options,
                                                            IdGenerator& ids, const Clock& clock);

  // The file, for the consumer's handler (voucher_handler.h): the library
  // books each batch in one transaction on its writer, with the inbox.
  SqliteFile& file() { return *db_; }
  // Inserts `event`'s voucher inside the transaction open on `tx`, the
  // file's writer (the caller holds its mutex); returns the voucher's id.
  // A SQLite error throws SQLite::Exception, which rolls the batch back.
  absl::StatusOr<std::string> Book(SQLite::Database& tx, const PaymentEvent& event);

  absl::StatusOr<int> PruneProcessed(int64_t cutoff_ms, int limit) override;

  absl::StatusOr<Voucher> GetByPayment(const std::string& payment_id) override;
  absl::StatusOr<VoucherPage> List(int64_t after_id, int limit) override;

  // The file's log length and skipped checkpoints (sqlite_metrics.h), db="accounting".
  void RegisterMetrics(MetricsRegistry& metrics) const;

 private:
  VoucherStore(std::unique_ptr<SqliteFile> db, IdGenerator& ids, const Clock& clock,
               const SQLite::Database* writer, std::unique_ptr<SQLite::Statement> insert_voucher);

  IdGenerator& ids_;
  const Clock& clock_;
  std::unique_ptr<SqliteFile> db_;
  // The file's writer, to check that Book runs on it (never dereferenced).
  const SQLite::Database* writer_;
  // On the writer connection, prepared once (SqliteFile::WithWriter) and
  // used only inside its transactions: no SQL text parsed per batch.
  std::unique_ptr<SQLite::Statement> insert_voucher_;
};

}  // namespace outbox::accounting
