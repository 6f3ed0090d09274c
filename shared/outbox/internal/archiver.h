#pragma once

// Retention: SENT rows acknowledged longer ago than the retention move to
// the archive, archived rows and the operators' audit records past their
// own retentions are deleted, each in bounded batches, so that no table
// grows without end.
#include <cstdint>
#include <functional>

#include "absl/time/time.h"
#include "shared/base/clock.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/repository.h"

namespace outbox {

struct Retention {
  absl::Duration sent = absl::Hours(24 * 7);  // SENT rows older than this are archived
  // Archived rows acknowledged longer ago than this are deleted (counted
  // from sent_at, as `sent` is: a value not above `sent` would delete rows
  // as soon as they are archived, and RecoveryOptions::Validate refuses it);
  // zero keeps them.
  absl::Duration archive = absl::Hours(24 * 30);
  absl::Duration audit = absl::Hours(24 * 365);  // audit records; zero keeps them
  int batch = 500;                               // rows per transaction
};

class Archiver {
 public:
  // `stopping` cuts a long pass short.
  Archiver(
      RecoveryRepository& outbox, const Clock& clock, MetricsRegistry& metrics, Retention retention,
      std::function<bool()> stopping = [] { return false; });

  struct Pass {
    int64_t archived = 0;        // SENT rows moved to the archive
    int64_t archive_pruned = 0;  // archived rows deleted
    int64_t audit_pruned = 0;    // audit records deleted
    // A step stopped at the bound with its batches full: more is due now
    // (after an upgrade, a retention shortened, or a load above what one
    // pass per housekeeping period moves).
    bool behind = false;
  };
  // One pass: archives, then prunes the archive, then the audit trail, each
  // up to a bounded number of batches, until one comes back short or fails
  // (logged; the next step runs all the same).
  Pass Run();

  int64_t archived() const { return archived_.value(); }
  int64_t archive_pruned() const { return archive_pruned_.value(); }
  int64_t audit_pruned() const { return audit_pruned_.value(); }

 private:
  // Batches of `step` until a short one, a failure (returned) or the
  // bound (then `behind` is set); each counted in `counter` and added to
  // `total`.
  absl::Status Batches(const std::function<absl::StatusOr<int>()>& step, Counter& counter,
                       int64_t* total, bool* behind);

  RecoveryRepository& outbox_;
  const Clock& clock_;
  const Retention retention_;
  const std::function<bool()> stopping_;
  Counter& archived_;
  Counter& archive_pruned_;
  Counter& audit_pruned_;
};

}  // namespace outbox
