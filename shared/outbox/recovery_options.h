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
  std::string instance_id;              // lease holder name
  RetryPolicy retry;                    // backoff of attempts 2..n (the budget is in each row)
  std::string pay_queue = "PAY_QUEUE";  // looked at before each round
  // With accounting shards, the queues of pay_queue's group instead: their
  // ready messages add up, and one without a consumer holds every
  // re-publish, since which shard a payment hashes to is the broker's call.
  std::vector<std::string> pay_queue_shards;
  // Queues whose dead-letter queues are watched (an alert while not empty).
  std::vector<std::string> dead_letter_sources = {"PAY_QUEUE", "ACC_QUEUE"};
  // More ready messages than this in pay_queue: re-publishing holds, until
  // the queue is down to a tenth of it (see HoldFor).
  int64_t hold_queue_depth = 10000;
  int batch = 200;
  double rate_per_second = 1000;
  absl::Duration lease_ttl = absl::Seconds(10);
  absl::Duration idle_sleep = absl::Seconds(1);
  absl::Duration confirm_timeout = absl::Seconds(5);
  int max_publish_failures = 3;  // rounds in a row before the lease is given up
  absl::Duration backlog_age = absl::Minutes(5);
  int64_t backlog_threshold = 1000;
  absl::Duration retention = absl::Hours(24 * 7);
  int archive_batch = 500;
  absl::Duration housekeeping_every = absl::Seconds(10);  // archive + alerts in step
  absl::Duration alert_resend = absl::Minutes(1);         // active alerts re-sent this often

  absl::Status Validate() const;  // INVALID_ARGUMENT naming the bad setting

  // The queues re-publishes go to: pay_queue, or its shards.
  std::vector<std::string> republish_queues() const {
    return pay_queue_shards.empty() ? std::vector<std::string>{pay_queue} : pay_queue_shards;
  }
};

}  // namespace outbox
