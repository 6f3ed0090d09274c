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
#include "absl/time/time.h"
#include "shared/base/internal/mutex.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/transport.h"
#include "shared/runtime/internal/worker_thread.h"

namespace outbox {

// How long a call waits while another connection (another process's
// DeadLetters) holds a dead-letter queue's lock (QueueBrowser::TryLock),
// polling, before it answers UNAVAILABLE. Taking from a queue hides what
// is taken from its count, so a call never reads it while another takes.
inline constexpr absl::Duration kDeadLetterLockWait = absl::Seconds(2);

struct DeadLetterPeek {
  std::vector<Delivery> messages;
  int64_t total = 0;
};

// What a re-drive or a removal did, and the error that stopped it (OK: it
// finished). What was done before an error is kept, so that it is logged,
// counted and audited all the same.
struct DeadLettersRedriven {
  int64_t moved = 0;  // published, confirmed, and their dead letters acked
  absl::Status status;
};
struct DeadLettersRemoved {
  std::vector<std::string> message_ids;  // removed (acked), in order
  absl::Status status;
};

class DeadLetters {
 public:
  // A queue whose dead letters may be moved back, and the exchange that feeds
  // it (re-driven messages go the way the original did).
  struct Source {
    std::string queue;
    std::string exchange;
  };
  // `broker` is used from the callers' threads, one call at a time. Each
  // call holds the dead-letter queue's lock while it counts and takes
  // (waiting up to `lock_wait` for it): UNAVAILABLE, saying so, while
  // another process holds it longer, never a count without what that
  // process has taken.
  DeadLetters(QueueBrowser& broker, std::vector<Source> sources,
              absl::Duration lock_wait = kDeadLetterLockWait);
  ~DeadLetters();

  // Keeps the connection alive between calls: a thread of its own polls it
  // (QueueBrowser::Poll) while it is idle, often enough for `heartbeat`
  // (the connection's AMQP heartbeat), so the broker never closes it for
  // missed heartbeats between housekeeping passes and operator calls. Without
  // it, a connection idle for two heartbeats is closed by the broker and
  // replaced at the next call. Once, before the first call.
  void KeepAlive(absl::Duration heartbeat);

  // outbox_amqp_connected and outbox_amqp_connection_drops_total with
  // connection="dead_letters" (up() and drops() are safe from any thread).
  void RegisterMetrics(MetricsRegistry& metrics) ABSL_NO_THREAD_SAFETY_ANALYSIS;

  // `queue` is a source's queue (INVALID_ARGUMENT otherwise).
  absl::StatusOr<DeadLetterPeek> Peek(const std::string& queue, int limit);
  // How many messages are parked in its dead-letter queue now (Peek's
  // total without the messages). NOT_FOUND while that queue does not exist.
  absl::StatusOr<int64_t> Count(const std::string& queue);
  // Moves up to `limit` (0 = all) of the messages parked now back to their
  // queue; returns how many moved, also when an error stopped it (logged:
  // dead_letters_redriven, or dead_letters_redrive_stopped with the error).
  DeadLettersRedriven Redrive(const std::string& queue, int limit, const std::string& actor = "");
  // Looks at up to `limit` of the messages parked now and removes (acks)
  // each one `settled` says is; the rest go back to the queue in their order.
  // Returns the ids removed, also when an error stopped it. NOT_FOUND while
  // the dead-letter queue does not exist.
  DeadLettersRemoved RemoveSettled(const std::string& queue, int limit,
                                   const std::function<bool(const Delivery&)>& settled);

 private:
  struct Parked {
    std::string dlq;
    int64_t count;  // messages in the dead-letter queue now
  };
  // Gives a dead-letter queue's lock back when a call ends.
  class Held;
  // Checks `queue`, connects, takes the lock of its DLQ and counts what is
  // parked there. The caller gives the lock back (Held).
  absl::StatusOr<Parked> OpenParked(const std::string& queue) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits up to lock_wait_ for the lock of `dlq`: false when another
  // connection still holds it.
  absl::StatusOr<bool> AwaitLock(const std::string& dlq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Gives the lock of `dlq` back, unless the connection went (and the lock
  // with it).
  void Release(const std::string& dlq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const Source* Find(const std::string& queue) const;

  // Waits (briefly) until `dlq` counts `total` again after a requeue.
  void AwaitCount(const std::string& dlq, int64_t total) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // One turn of the keep-alive thread: polls the connection if it is up.
  void PollIdle();

  const std::vector<Source> sources_;
  const absl::Duration lock_wait_;
  Mutex mu_;
  QueueBrowser* const broker_ ABSL_PT_GUARDED_BY(mu_);
  WorkerThread keeper_;  // KeepAlive's; declared last, so stopped first
};

}  // namespace outbox
