#pragma once

// accounting.db: vouchers and the ids of processed messages, written in one
// transaction so a message is applied at most once.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "accounting_service/voucher.h"
#include "shared/base/clock.h"
#include "shared/base/ids.h"
#include "shared/base/mutex.h"
#include "shared/base/page.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/inbox_pruner.h"
#include "shared/sqlite/inbox.h"
#include "shared/sqlite/sqlite_file.h"

namespace outbox::accounting {

struct ApplyOutcome {
  std::string voucher_id;
  bool duplicate = false;  // already applied: nothing new was written
};

using VoucherPage = Page<Voucher>;

// What the consumer needs from the voucher book (the seam its unit tests fake).
class VoucherLedger {
 public:
  virtual ~VoucherLedger() = default;
  // Applies a batch in ONE transaction. A message id seen before, or a
  // payment that already has a voucher, creates nothing and reports the
  // existing voucher. Vouchers are kept forever, so a message whose id was
  // pruned (ProcessedLog) is still found to be a duplicate by its payment.
  virtual absl::StatusOr<std::vector<ApplyOutcome>> ApplyBatch(
      const std::vector<PaymentEvent>& events) = 0;
  // For each event, the voucher a message id seen before or its payment
  // already has (what ApplyBatch would report as a duplicate), or nullopt.
  // Reads only.
  virtual absl::StatusOr<std::vector<std::optional<std::string>>> Booked(
      const std::vector<PaymentEvent>& events) = 0;
};

// accounting.db's inbox: processed_messages, by payment and voucher.
inline const InboxTable kInbox{"processed_messages", "payment_id", "voucher_id"};

class VoucherStore final : public VoucherLedger, public ProcessedLog {
 public:
  // Creates accounting.db or upgrades it to the latest schema version
  // (AccountingDbSchema); FAILED_PRECONDITION, untouched, for a newer file.
  static absl::StatusOr<std::unique_ptr<VoucherStore>> Open(const std::string& path,
                                                            const DbOptions& options,
                                                            IdGenerator& ids, const Clock& clock);

  absl::StatusOr<std::vector<ApplyOutcome>> ApplyBatch(
      const std::vector<PaymentEvent>& events) override;
  absl::StatusOr<std::vector<std::optional<std::string>>> Booked(
      const std::vector<PaymentEvent>& events) override;
  absl::StatusOr<int> PruneProcessed(int64_t cutoff_ms, int limit) override;

  absl::StatusOr<Voucher> GetByPayment(const std::string& payment_id);
  absl::StatusOr<VoucherPage> List(int64_t after_id, int limit);

  // The file's log length and skipped checkpoints (sqlite_metrics.h), db="accounting".
  void RegisterMetrics(MetricsRegistry& metrics) const;

 private:
  VoucherStore(std::unique_ptr<SqliteFile> db, IdGenerator& ids, const Clock& clock);

  IdGenerator& ids_;
  const Clock& clock_;
  std::unique_ptr<SqliteFile> db_;
  // On the writer connection, prepared once: no SQL text parsed per batch.
  Inbox inbox_ ABSL_GUARDED_BY(db_->write_mu);
  SQLite::Statement by_payment_ ABSL_GUARDED_BY(db_->write_mu);
  SQLite::Statement insert_voucher_ ABSL_GUARDED_BY(db_->write_mu);
};

}  // namespace outbox::accounting
