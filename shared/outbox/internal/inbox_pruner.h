#pragma once

// Keeps a consumer's inbox (the processed message ids) bounded: deletes the
// ids processed longer than a retention ago, a small batch per transaction,
// a few batches per pass, from a thread of its own. The retention must
// outlast every copy that can still arrive (recovery's whole retry window,
// plus re-drives): a copy that comes after its id was pruned is applied
// again unless the adopter's store also finds it by its business key.
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shared/base/clock.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/repository.h"
#include "shared/runtime/internal/worker_thread.h"

namespace outbox {

struct PrunerOptions {
  absl::Duration retention = absl::Hours(720);  // zero: keep every id (do not Start)
  int batch = 1000;                             // ids deleted per transaction
  int batches_per_pass = 5;
  absl::Duration every = absl::Seconds(10);  // between passes that caught up
  // Between passes that stopped with more due (after an upgrade, or a
  // retention shortened): the consumer gets the write lock in between.
  absl::Duration behind_every = absl::Milliseconds(200);
};

class ProcessedPruner {
 public:
  ProcessedPruner(ProcessedLog& log, const Clock& clock, MetricsRegistry& metrics,
                  PrunerOptions options);
  ~ProcessedPruner();

  void Start();
  void Stop();

  // One pass: up to batches_per_pass batches, ending early at one that was
  // not full. Returns the ids pruned. Tests call it directly.
  absl::StatusOr<int64_t> Pass();
  // True when the last pass stopped with a full batch: more may be due.
  bool behind() const { return behind_; }

  int64_t pruned() const { return pruned_.value(); }

 private:
  bool Step();

  ProcessedLog& log_;
  const Clock& clock_;
  const PrunerOptions options_;
  Counter& pruned_;
  bool behind_ = false;  // the pruner thread's, or the test's
  WorkerThread thread_;
};

}  // namespace outbox
