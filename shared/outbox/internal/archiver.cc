#include "shared/outbox/internal/archiver.h"

#include <utility>

#include "shared/observability/log.h"

namespace outbox {
namespace {
// A pass moves or deletes at most this many batches per table, so the
// round it shares a turn with is never held up for long; a backlog drains
// over several passes (Pass::behind).
constexpr int kMaxBatchesPerPass = 20;
}  // namespace

Archiver::Archiver(RecoveryRepository& outbox, const Clock& clock, MetricsRegistry& metrics,
                   Retention retention, std::function<bool()> stopping)
    : outbox_(outbox),
      clock_(clock),
      retention_(retention),
      stopping_(std::move(stopping)),
      archived_(metrics.AddCounter("outbox_archived_total", "SENT rows moved to the archive")),
      archive_pruned_(metrics.AddCounter("outbox_archive_pruned_total",
                                         "archived rows deleted after the archive's retention")),
      audit_pruned_(metrics.AddCounter("outbox_audit_pruned_total",
                                       "audit records deleted after the audit's retention")) {}

absl::Status Archiver::Batches(const std::function<absl::StatusOr<int>()>& step, Counter& counter,
                               int64_t* total, bool* behind) {
  for (int i = 0; i < kMaxBatchesPerPass; ++i) {
    if (stopping_()) return absl::OkStatus();
    absl::StatusOr<int> n = step();
    if (!n.ok()) return n.status();
    counter.Add(*n);
    *total += *n;
    if (*n < retention_.batch) return absl::OkStatus();
  }
  *behind = true;
  return absl::OkStatus();
}

Archiver::Pass Archiver::Run() {
  const int64_t now = clock_.NowMillis();
  const int batch = retention_.batch;
  Pass pass;
  const int64_t sent_cutoff = now - absl::ToInt64Milliseconds(retention_.sent);
  if (absl::Status s = Batches([&] { return outbox_.ArchiveSent(sent_cutoff, batch); }, archived_,
                               &pass.archived, &pass.behind);
      !s.ok()) {
    LogWarning("archive_failed", {KV("error", s.message())});
  }
  if (retention_.archive > absl::ZeroDuration()) {
    const int64_t cutoff = now - absl::ToInt64Milliseconds(retention_.archive);
    if (absl::Status s = Batches([&] { return outbox_.PruneArchive(cutoff, batch); },
                                 archive_pruned_, &pass.archive_pruned, &pass.behind);
        !s.ok()) {
      LogWarning("archive_prune_failed", {KV("error", s.message())});
    }
    if (pass.archive_pruned > 0) {
      LogInfo("archive_pruned", {KV("rows", pass.archive_pruned), KV("cutoff_ms", cutoff)});
    }
  }
  if (retention_.audit > absl::ZeroDuration()) {
    const int64_t cutoff = now - absl::ToInt64Milliseconds(retention_.audit);
    if (absl::Status s = Batches([&] { return outbox_.PruneAudit(cutoff, batch); }, audit_pruned_,
                                 &pass.audit_pruned, &pass.behind);
        !s.ok()) {
      LogWarning("audit_prune_failed", {KV("error", s.message())});
    }
    if (pass.audit_pruned > 0) {
      LogInfo("audit_pruned", {KV("rows", pass.audit_pruned), KV("cutoff_ms", cutoff)});
    }
  }
  return pass;
}

}  // namespace outbox
