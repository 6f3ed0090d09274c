#include "shared/outbox/internal/recovery_options.h"

#include "absl/strings/str_cat.h"

namespace outbox {

absl::Status RecoveryOptions::Validate() const {
  if (batch < 1 || rate_per_second <= 0 || lease_ttl <= absl::ZeroDuration() ||
      max_publish_failures < 1 || instance_id.empty()) {
    return absl::InvalidArgumentError(
        "need recovery_batch >= 1, recovery_rate > 0, recovery_lease_ttl > 0, "
        "recovery_max_publish_failures >= 1 and a non-empty recovery_instance_id");
  }
  if (watched_queues.empty()) {
    return absl::InvalidArgumentError("recovery needs at least one watched queue");
  }
  if (hold_queue_depth < 0) {
    return absl::InvalidArgumentError("recovery_hold_queue_depth must be >= 0");
  }
  if (archive_retention < absl::ZeroDuration() || audit_retention < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "archive_retention and audit_retention must be >= 0 (0 keeps every row)");
  }
  // Rows reach the archive once acknowledged `retention` ago: kept no longer
  // than that, each would be deleted in the pass that archives it.
  if (archive_retention > absl::ZeroDuration() && archive_retention <= retention) {
    return absl::InvalidArgumentError(absl::StrCat(
        "archive_retention (", absl::FormatDuration(archive_retention),
        ") must be longer than retention (", absl::FormatDuration(retention),
        "), or 0 to keep every archived row: rows are archived once acknowledged longer ago than "
        "retention, and would be deleted as soon as they are"));
  }
  if (alert_resend <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("alert_resend must be positive");
  }
  return retry.Validate();
}

}  // namespace outbox
