#pragma once

// What an operator needs to see of a SQLite file a service writes: how long
// its write-ahead log is and how many checkpoints could not run.
#include <string>

#include "shared/observability/metrics.h"
#include "shared/sqlite/sqlite_file.h"

namespace outbox {

// Registers, labelled {db="<db>"}:
//   outbox_sqlite_wal_bytes                 the log's length after this
//                                           process's last commit (pages x page size)
//   outbox_sqlite_checkpoints_skipped_total checkpoints that could not get
//                                           the write lock (or failed)
// `file` must outlive `metrics`' scrapes.
void RegisterSqliteFileMetrics(const SqliteFile& file, const std::string& db,
                               MetricsRegistry& metrics);

}  // namespace outbox
