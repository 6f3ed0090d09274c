#include "shared/outbox/internal/inbox_pruner.h"

#include "shared/observability/log.h"

namespace outbox {

ProcessedPruner::ProcessedPruner(ProcessedLog& log, const Clock& clock, MetricsRegistry& metrics,
                                 PrunerOptions options)
    : log_(log),
      clock_(clock),
      options_(options),
      pruned_(metrics.AddCounter("outbox_processed_pruned_total",
                                 "processed message ids deleted after their retention")) {}

ProcessedPruner::~ProcessedPruner() {
  Stop();
}

void ProcessedPruner::Start() {
  thread_.Start([this] { return Step(); });
}

void ProcessedPruner::Stop() {
  thread_.Stop();
}

bool ProcessedPruner::Step() {
  if (thread_.stopping()) return false;
  auto pruned = Pass();
  if (!pruned.ok()) {
    LogWarning("processed_prune_failed", {KV("error", pruned.status().message())});
  }
  thread_.Sleep(behind_ ? options_.behind_every : options_.every);
  return true;
}

absl::StatusOr<int64_t> ProcessedPruner::Pass() {
  behind_ = false;
  if (options_.retention <= absl::ZeroDuration()) return 0;  // every id is kept
  const int64_t cutoff = clock_.NowMillis() - absl::ToInt64Milliseconds(options_.retention);
  int64_t total = 0;
  for (int i = 0; i < options_.batches_per_pass && !thread_.stopping(); ++i) {
    auto n = log_.PruneProcessed(cutoff, options_.batch);
    if (!n.ok()) return n.status();
    pruned_.Add(*n);
    total += *n;
    behind_ = *n >= options_.batch;
    if (!behind_) break;
  }
  if (total > 0) {
    LogInfo("processed_pruned",
            {KV("rows", total), KV("cutoff_ms", cutoff),
             KV("retention", absl::FormatDuration(options_.retention)), KV("more_due", behind_)});
  }
  return total;
}

}  // namespace outbox
