#pragma once

// The queue of a group writer, whatever its store (GroupWriter on SQLite,
// PgGroupWriter on PostgreSQL): writes from many threads queued under one
// mutex, the writer's thread, and the stop that drains the queue and turns
// later writes away. Only the group's transaction differs between the
// stores: the writer's loop (`run`) takes its groups off queue() under mu().
//
// `Pending` is one write: a movable type with members `spec` (its
// MessageSpec) and `done` (a one-shot callable taking
// absl::StatusOr<OutboxMessage>), aggregate-initialised with `done` last.
// Below the queue, the steps of a group around the store's transaction and
// the backpressure (WriteHold), which both writers take alike. Header-only.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shared/base/clock.h"
#include "shared/base/internal/mutex.h"
#include "shared/observability/log.h"
#include "shared/outbox/internal/state_machine.h"
#include "shared/outbox/message.h"
#include "shared/outbox/retry_policy.h"

namespace outbox {

// What a write hears once its writer is stopping.
inline absl::Status WriterStopping() {
  return absl::UnavailableError("the producer's writer is stopping");
}

template <typename Pending>
class WriteQueue {
 public:
  // `run` is the writer's loop: it returns once stopping() and nothing it
  // takes is left. The owner calls Stop before its own members go.
  explicit WriteQueue(std::function<void()> run) : run_(std::move(run)) {}
  WriteQueue(const WriteQueue&) = delete;
  WriteQueue& operator=(const WriteQueue&) = delete;

  // Runs the loop on a thread of its own.
  void Start() { thread_ = std::thread(run_); }
  // Sets stopping(), then waits for the loop to drain the queue; runs the
  // loop on the calling thread when Start never ran (or Stop ran already:
  // nothing is queued).
  void Stop() ABSL_LOCKS_EXCLUDED(mu_) {
    {
      MutexLock lock(&mu_);
      stopping_ = true;
    }
    if (thread_.joinable()) {
      thread_.join();
    } else {
      run_();
    }
  }

  // Queues `write` and returns at once; when stopping, `write.done` hears
  // WriterStopping() at once on the calling thread.
  void Push(Pending write) ABSL_LOCKS_EXCLUDED(mu_) {
    {
      MutexLock lock(&mu_);
      if (!stopping_) {
        queue_.push_back(std::move(write));
        return;
      }
    }
    std::move(write.done)(WriterStopping());
  }
  // Push, waiting for the outcome (`write.done` is set here).
  absl::StatusOr<OutboxMessage> PushAndWait(Pending write) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::StatusOr<OutboxMessage> outcome;
    Notification done;  // outbox::Notification: TSan sees it (shared/base/internal/mutex.h)
    write.done = [&](absl::StatusOr<OutboxMessage> written) {
      outcome = std::move(written);
      done.Notify();
    };
    Push(std::move(write));
    done.WaitForNotification();
    return outcome;
  }

  // Waits for a write or the stop, then moves up to `max` of the oldest
  // writes onto `group`; false once stopping and drained. For a loop that
  // waits for nothing else.
  bool Next(size_t max, std::vector<Pending>& group) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stopping_; };
    mu_.Await(absl::Condition(&ready));
    if (queue_.empty()) return false;
    Take(max, group);
    return true;
  }
  // Moves up to `max` of the oldest writes onto `group` (which may hold
  // some already).
  void Take(size_t max, std::vector<Pending>& group) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (!queue_.empty() && group.size() < max) {
      group.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
  }

  // For a loop that waits for more than writes (state of its own guarded
  // by the same mutex).
  Mutex& mu() ABSL_LOCK_RETURNED(mu_) { return mu_; }
  bool empty() const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return queue_.empty(); }
  bool stopping() const ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stopping_; }

 private:
  const std::function<void()> run_;
  Mutex mu_;
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// A group writer's backpressure (its options max_unsent and max_hold, as
// GroupWriterOptions says): while the consumer replies (acknowledgements
// applied in the last second) but at least `max_unsent` rows are SENDING,
// new writes wait until until(), `max_hold` after the last group of new
// writes. No acknowledgements for a second: the consumer (or the broker) is
// away, recovery's business, and holding callers would only make the
// outage theirs; nothing is held. The writer's thread only.
class WriteHold {
 public:
  // The SENDING rows, counted up to `limit` (the count stays cheap in an
  // outage).
  using CountSending = std::function<absl::StatusOr<int64_t>(int64_t limit)>;

  // `max_unsent` 0: never held.
  WriteHold(int64_t max_unsent, absl::Duration max_hold, const Clock& clock, CountSending count)
      : max_unsent_(max_unsent), max_hold_(max_hold), clock_(clock), count_(std::move(count)) {}

  // After a group: `wrote` when it took new writes (rather than only ending a
  // hold early for acknowledgements), `last_ack_ms` when acknowledgements
  // were last applied (the clock's milliseconds; kNoAck: none yet). A hold
  // starts after a group of new writes, or once the last one is over, never
  // extended by acknowledgements during it: no write waits longer than
  // max_hold for the backlog.
  void After(bool wrote, int64_t last_ack_ms) {
    const absl::Time now = clock_.Now();
    if (!Lagging(last_ack_ms)) {
      until_ = absl::InfinitePast();
    } else if (wrote || now >= until_) {
      until_ = now + max_hold_;
    }
  }
  // New writes wait until then (InfinitePast: they do not).
  absl::Time until() const { return until_; }

  static constexpr int64_t kNoAck = std::numeric_limits<int64_t>::min() / 2;

 private:
  bool Lagging(int64_t last_ack_ms) {
    if (max_unsent_ <= 0) return false;
    const int64_t now = clock_.NowMillis();
    if (now - last_ack_ms > 1000) return false;
    absl::StatusOr<int64_t> sending = count_(max_unsent_);
    if (!sending.ok()) {
      // Not known: writes are not held (the next group asks again). Logged
      // once a minute at most, while it lasts.
      if (now - last_count_error_ms_ >= 60'000) {
        LogWarning("unsent_count_failed", {KV("error", sending.status().message())});
        last_count_error_ms_ = now;
      }
      return false;
    }
    return *sending >= max_unsent_;
  }

  const int64_t max_unsent_;
  const absl::Duration max_hold_;
  const Clock& clock_;
  const CountSending count_;
  absl::Time until_ = absl::InfinitePast();
  // When a failed count was last logged (never yet).
  int64_t last_count_error_ms_ = std::numeric_limits<int64_t>::min() / 2;
};

// The outbox rows of `group`'s writes, made at `now_ms` (their specs moved
// out).
template <typename Pending>
std::vector<OutboxMessage> NewGroupRows(std::vector<Pending>& group, int64_t now_ms,
                                        const RetryPolicy& retry) {
  std::vector<OutboxMessage> rows;
  rows.reserve(group.size());
  for (Pending& p : group) rows.push_back(NewOutboxMessage(std::move(p.spec), now_ms, retry));
  return rows;
}

// The outcomes of a group of `writes` once its transaction is over: `tx`'s
// error for every write when it failed (`written` and `statuses` may be
// empty then), else each write's row in `written` or its own error in
// `statuses` (both moved out).
inline std::vector<absl::StatusOr<OutboxMessage>> GroupOutcomes(
    size_t writes, const absl::Status& tx, std::vector<OutboxMessage>& written,
    std::vector<absl::Status>& statuses) {
  std::vector<absl::StatusOr<OutboxMessage>> outcomes;
  outcomes.reserve(writes);
  if (!tx.ok()) {
    outcomes.assign(writes, tx);
    return outcomes;
  }
  for (size_t i = 0; i < writes; ++i) {
    if (statuses[i].ok()) {
      outcomes.emplace_back(std::move(written[i]));
    } else {
      outcomes.emplace_back(std::move(statuses[i]));
    }
  }
  return outcomes;
}

// The messages of the writes that committed, for the relay.
inline std::vector<OutgoingMessage> CommittedMessages(
    const std::vector<absl::StatusOr<OutboxMessage>>& outcomes) {
  std::vector<OutgoingMessage> messages;
  for (const absl::StatusOr<OutboxMessage>& out : outcomes) {
    if (out.ok()) messages.push_back(ToOutgoing(*out));
  }
  return messages;
}

// Each caller's completion with its outcome, in the group's order, no lock
// held: writes queued meanwhile join the next group.
template <typename Pending>
void AnswerWrites(std::vector<Pending>& group,
                  std::vector<absl::StatusOr<OutboxMessage>>& outcomes) {
  for (size_t i = 0; i < group.size(); ++i) std::move(group[i].done)(std::move(outcomes[i]));
}

}  // namespace outbox
