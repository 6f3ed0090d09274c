#pragma once

// Operator access to the dead-letter queues (<queue>.DLQ): peek at parked
// messages and move them back to their queue once the cause is fixed. The
// recovery role (shared/roles/recovery.h) makes one over its producer's
// queues; its loop raises OutboxDeadLetters while any holds messages.
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "shared/base/mutex.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/transport.h"

namespace outbox {

struct DeadLetterPeek {
  std::vector<Delivery> messages;
  int64_t total = 0;
};

class DeadLetters {
 public:
  // A queue whose dead letters may be moved back, and the exchange that feeds
  // it (re-driven messages go the way the original did).
  struct Source {
    std::string queue;
    std::string exchange;
  };
  // `broker` is used from the callers' threads, one call at a time.
  DeadLetters(QueueBrowser& broker, std::vector<Source> sources);

  // outbox_amqp_connected and outbox_amqp_connection_drops_total with
  // connection="dead_letters" (up() and drops() are safe from any thread).
  void RegisterMetrics(MetricsRegistry& metrics) ABSL_NO_THREAD_SAFETY_ANALYSIS;

  // `queue` is a source's queue (INVALID_ARGUMENT otherwise).
  absl::StatusOr<DeadLetterPeek> Peek(const std::string& queue, int limit);
  // Moves up to `limit` (0 = all) of the messages parked now back to their
  // queue; returns how many moved.
  absl::StatusOr<int64_t> Redrive(const std::string& queue, int limit,
                                  const std::string& actor = "");
  // Looks at up to `limit` of the messages parked now and removes (acks)
  // each one `settled` says is; the rest go back to the queue in their order.
  // Returns the ids removed. NOT_FOUND while the dead-letter queue does not
  // exist.
  absl::StatusOr<std::vector<std::string>> RemoveSettled(
      const std::string& queue, int limit, const std::function<bool(const Delivery&)>& settled);

 private:
  struct Parked {
    std::string dlq;
    int64_t count;  // messages in the dead-letter queue now
  };
  // Checks `queue`, connects, and counts what is parked in its DLQ.
  absl::StatusOr<Parked> OpenParked(const std::string& queue) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const Source* Find(const std::string& queue) const;

  // Waits (briefly) until `dlq` counts `total` again after a requeue.
  void AwaitCount(const std::string& dlq, int64_t total) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::vector<Source> sources_;
  Mutex mu_;
  QueueBrowser* const broker_ ABSL_PT_GUARDED_BY(mu_);
};

}  // namespace outbox
