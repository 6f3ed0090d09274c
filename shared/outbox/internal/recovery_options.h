#pragma once

// The recovery loop's settings, shared by its parts (lease_keeper.h,
// republish_hold.h, republisher.h, archiver.h, recovery_alerts.h).
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "shared/outbox/retry_policy.h"

namespace outbox {

struct RecoveryOptions {
  std::string instance_id;  // lease holder name
  RetryPolicy retry;        // backoff of attempts 2..n (the budget is in each row)
  // The queues re-published rows land in, looked at before each round:
  // their ready messages add up, and one without a consumer holds every
  // re-publish (with a sharded consumer, which shard a row hashes to is
  // the broker's call). At least one.
  std::vector<std::string> watched_queues;
  // Their name in logs, metrics and alerts (a sharded group's name); "" =
  // the first queue's.
  std::string watched_label;
  // The queues the producer hears acknowledgements on (its reply queues).
  // Looked at only while acknowledgements are stalled: when one of them has
  // no consumer, the producer itself is away from the broker, so its fast
  // path is not publishing either and the due rows were never sent. Then
  // re-publishing goes on instead of holding, and the acknowledgements wait
  // in the reply queue until the producer is back. Empty: a stall always
  // holds (one probe row per first retry delay).
  std::vector<std::string> reply_queues;
  // Queues whose dead-letter queues are watched (an alert while not empty).
  std::vector<std::string> dead_letter_sources;
  // The business key's name in logs and alert labels, and who acknowledges
  // (in a FAILED alert's "no acknowledgement from ...").
  std::string biz_key_label = "biz_key";
  std::string consumer_name = "the consumer";
  // More ready messages than this in the watched queues: re-publishing holds, until
  // the queue is down to a tenth of it (see HoldFor).
  int64_t hold_queue_depth = 10000;
  // A queue hold (nobody consumes, or a backlog) raises its alert only once
  // it has lasted this long: consumers reconnect within a second or two of a
  // broker restart, and that is no incident. The hold itself starts at once.
  absl::Duration hold_alert_after = absl::Seconds(5);
  int batch = 200;
  double rate_per_second = 1000;
  absl::Duration lease_ttl = absl::Seconds(10);
  absl::Duration idle_sleep = absl::Seconds(1);
  absl::Duration confirm_timeout = absl::Seconds(5);
  int max_publish_failures = 3;  // rounds in a row before the lease is given up
  absl::Duration backlog_age = absl::Minutes(5);
  int64_t backlog_threshold = 1000;
  absl::Duration retention = absl::Hours(24 * 7);  // SENT rows move to the archive
  // Archived rows acknowledged longer ago than this, and audit records
  // older than this, are deleted (archiver.h); zero keeps them. A nonzero
  // archive_retention must be longer than `retention` (Validate).
  absl::Duration archive_retention = absl::Hours(24 * 30);
  absl::Duration audit_retention = absl::Hours(24 * 365);
  int archive_batch = 500;  // rows per transaction, for each of the three
  absl::Duration housekeeping_every = absl::Seconds(10);  // archive + alerts in step
  absl::Duration alert_resend = absl::Minutes(1);         // active alerts re-sent this often

  absl::Status Validate() const;  // INVALID_ARGUMENT naming the bad setting

  // The name the watched queues go by in logs, metrics and alerts.
  const std::string& watched_name() const {
    static const std::string none;
    if (!watched_label.empty()) return watched_label;
    return watched_queues.empty() ? none : watched_queues.front();
  }
};

}  // namespace outbox
