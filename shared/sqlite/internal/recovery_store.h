#pragma once

// Recovery's view of a producer's SQLite database (its outbox table, made by
// CreateOutboxTable): claim due SENDING rows under a lease, fail exhausted
// ones, archive old SENT rows (the RecoveryRepository of its loop). The
// operator's queries and re-drives on the same file: operator_store.h.
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shared/base/internal/mutex.h"
#include "shared/outbox/internal/due_rows.h"
#include "shared/outbox/repository.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/sqlite/schema.h"
#include "shared/sqlite/sqlite_file.h"

namespace outbox {

// The database recovery works on, as its producer makes it. Recovery never
// creates or upgrades it: it opens only the schema's latest version.
struct ProducerDb {
  const DbSchema* schema = nullptr;  // the producer's schema (required)
  // Who creates and upgrades the file, and the setting that names it: in
  // the errors of Open and OpenWhenCreated ("" = not mentioned).
  std::string producer = "its producer";
  std::string path_setting;
  std::string metrics_label = "outbox";  // the `db` label of its SQLite metrics
  std::string name = "database";         // what the file is called in errors ("orders database")
};

class RecoveryStore final : public RecoveryRepository {
 public:
  // Opens the database as its producer made it; never creates the file, a
  // table or a column (a wrong path must not become an empty database).
  // NOT_FOUND while the file is missing or older than the latest schema
  // version (the producer upgrades it), UNAVAILABLE while another process
  // keeps it locked, FAILED_PRECONDITION, untouched, when it is newer.
  static absl::StatusOr<std::unique_ptr<RecoveryStore>> Open(const std::string& path,
                                                             const DbOptions& options,
                                                             const ProducerDb& db);

  // Open, tried again every `poll` for up to `wait` while the producer has
  // not created the file and its schema yet (both may start at once).
  // `on_first_wait` runs once, with the reason, before the first wait. When
  // `wait` runs out: FAILED_PRECONDITION naming the path.
  static absl::StatusOr<std::unique_ptr<RecoveryStore>> OpenWhenCreated(
      const std::string& path, const DbOptions& options, const ProducerDb& db, absl::Duration wait,
      const std::function<void(const absl::Status&)>& on_first_wait,
      absl::Duration poll = absl::Milliseconds(200));

  // Claims through the (status, next_retry_at) index, applying OnDue to each
  // row in the claim's transaction (see RecoveryRepository).
  absl::StatusOr<Claimed> ClaimDue(int64_t now_ms, int limit, const std::string& lease_holder,
                                   const RetryPolicy& policy) override;
  // OnHold on due rows through the same index and fence.
  absl::StatusOr<int> DeferDue(int64_t now_ms, int limit, const std::string& lease_holder,
                               const RetryPolicy& policy) override;
  absl::StatusOr<std::vector<OutboxMessage>> ListFailed(int limit) override;

  // The query plan of the claim's SELECT (EXPLAIN QUERY PLAN), for benchmarks.
  std::string ExplainClaim();

  absl::Status RecordPublishFailure(const std::vector<std::string>& message_ids,
                                    const std::string& error, int64_t now_ms) override;

  absl::StatusOr<bool> TryAcquireLease(const std::string& holder, int64_t now_ms,
                                       int64_t ttl_ms) override;
  // Gives the lease up (expires it now) if we hold it.
  absl::Status ReleaseLease(const std::string& holder, int64_t now_ms) override;
  absl::StatusOr<LeaseState> Lease() override;

  // Moves up to `batch` SENT rows with sent_at < cutoff to outbox_archive.
  absl::StatusOr<int> ArchiveSent(int64_t cutoff_ms, int batch) override;
  // Retention of the archive (by sent_at) and of the audit trail (by at):
  // through the indexes of CreateOutboxRetentionTables, a batch per
  // transaction with the table's row of outbox_retention (its watermark
  // raised to `cutoff_ms`, never lowered, and the rows counted).
  // FAILED_PRECONDITION when the producer's schema lacks those tables.
  absl::StatusOr<int> PruneArchive(int64_t cutoff_ms, int batch) override;
  absl::StatusOr<int> PruneAudit(int64_t cutoff_ms, int batch) override;

  absl::StatusOr<OutboxMessage> Get(const std::string& message_id) override;
  absl::StatusOr<std::vector<FailureGroup>> FailureGroups(int limit,
                                                          const std::string& kind) override;
  // Who the history names for recovery's own events (its instance id).
  void set_instance(std::string instance) { instance_ = std::move(instance); }
  // The adopter's step when ClaimDue turns a row FAILED (attempts spent, or
  // too old), in the claim's transaction (RowClosed, outbox_table.h); set
  // before the loop runs.
  void set_on_closed(RowClosed on_closed) { on_closed_ = std::move(on_closed); }
  absl::StatusOr<int64_t> CountSendingOlderThan(int64_t created_before_ms) override;
  absl::StatusOr<AckProgress> ReadAckProgress() override;

 private:
  friend class OperatorStore;  // the operator's verbs on the same file (operator_store.h)

  RecoveryStore(std::unique_ptr<SqliteFile> db, std::string metrics_label, bool retention_tables)
      : db_(std::move(db)),
        metrics_label_(std::move(metrics_label)),
        retention_tables_(retention_tables) {}
  // Runs a claim's transaction (due_rows.h) on the writer.
  DueRowsRunner DueRows();
  // Deletes up to `batch` rows of `table` whose `column` is below
  // `cutoff_ms`, oldest first through `index`, with the table's watermark,
  // in one write transaction; looks first, so nothing due takes no lock.
  absl::StatusOr<int> PruneOlderThan(const char* table, const char* index, const char* column,
                                     int64_t cutoff_ms, int batch);

  std::unique_ptr<SqliteFile> db_;
  const std::string metrics_label_;
  const bool retention_tables_;  // the producer's schema has CreateOutboxRetentionTables'
  std::string instance_ = "recovery";
  RowClosed on_closed_;
};

}  // namespace outbox
