#include "shared/outbox/archiver.h"

#include <utility>

#include "shared/observability/log.h"

namespace outbox {
namespace {
constexpr int kMaxArchiveBatchesPerPass = 20;
}  // namespace

Archiver::Archiver(RecoveryRepository& outbox, const Clock& clock, MetricsRegistry& metrics,
                   absl::Duration retention, int batch, std::function<bool()> stopping)
    : outbox_(outbox),
      clock_(clock),
      retention_(retention),
      batch_(batch),
      stopping_(std::move(stopping)),
      archived_(metrics.AddCounter("outbox_archived_total", "SENT rows moved to the archive")) {}

int64_t Archiver::Run() {
  const int64_t cutoff = clock_.NowMillis() - absl::ToInt64Milliseconds(retention_);
  int64_t total = 0;
  for (int i = 0; i < kMaxArchiveBatchesPerPass && !stopping_(); ++i) {
    auto moved = outbox_.ArchiveSent(cutoff, batch_);
    if (!moved.ok()) {
      LogWarning("archive_failed", {KV("error", moved.status().message())});
      break;
    }
    archived_.Add(*moved);
    total += *moved;
    if (*moved < batch_) break;
  }
  return total;
}

}  // namespace outbox
