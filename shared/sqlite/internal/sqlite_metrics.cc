#include "shared/sqlite/internal/sqlite_metrics.h"

namespace outbox {

void RegisterSqliteFileMetrics(const SqliteFile& file, const std::string& db,
                               MetricsRegistry& metrics) {
  const WalCheckpointer* checkpointer = file.checkpointer();
  if (checkpointer == nullptr) return;
  const double page_size = static_cast<double>(file.page_size());
  metrics.AddGauge("outbox_sqlite_wal_bytes",
                   "write-ahead log length after this process's last commit", {{"db", db}},
                   [checkpointer, page_size] { return checkpointer->log_frames() * page_size; });
  metrics.AddCounterReader("outbox_sqlite_checkpoints_skipped_total",
                           "checkpoints that could not get the write lock in time, or failed",
                           {{"db", db}},
                           [checkpointer] { return static_cast<double>(checkpointer->skipped()); });
}

}  // namespace outbox
