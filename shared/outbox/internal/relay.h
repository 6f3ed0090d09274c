#pragma once

// The relay (the fast path): publishes messages handed over right after
// their commit, pipelined (a window of unconfirmed messages), on its own
// thread and broker connection. It never marks anything: a row stays SENDING
// until its consumer acknowledges it, so a nack, a return, a confirm timeout
// or a lost connection only notes the error on the row and leaves it to the
// recovery loop (recovery_loop.h).
#include <atomic>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "shared/base/clock.h"
#include "shared/base/internal/mutex.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/internal/confirm_window.h"
#include "shared/outbox/repository.h"
#include "shared/outbox/transport.h"
#include "shared/runtime/internal/worker_thread.h"

namespace outbox {

struct RelayOptions {
  size_t window = 1024;      // unconfirmed messages in flight
  size_t capacity = 50'000;  // queued while the broker is away; beyond, left to recovery
  absl::Duration confirm_timeout = absl::Seconds(5);
  // A message queued this long (the broker away or the link slow) may have
  // been re-published by recovery meanwhile (its first retry is due): the
  // relay asks the store and publishes only those recovery has not taken
  // over, since a late copy of the others would only be a duplicate. The
  // service sets it to the first retry delay.
  absl::Duration hand_over_after = absl::InfiniteDuration();
  // The crash point (shared/runtime/internal/failpoint.h) evaluated once confirms
  // came in, before the next turn; empty: none.
  std::string after_publish_failpoint;
};

class Relay final : public RelayQueue {
 public:
  Relay(MessagePublisher& broker, OutboxRepository& outbox, const Clock& clock,
        MetricsRegistry& metrics, RelayOptions options);
  ~Relay() override;

  void Start();
  void Stop();  // publishes what is queued if the broker is there, then stops

  // Never blocks the caller.
  using RelayQueue::Enqueue;
  void Enqueue(std::vector<OutgoingMessage> messages, absl::Time written_at) override;

  // One turn of the loop: connect if needed, fill the window, settle
  // confirms. Returns false once stopped and drained. Tests call it directly.
  bool Step();

  int64_t confirmed() const { return confirmed_.value(); }
  int64_t failed() const { return failed_total_.value(); }
  int64_t dropped() const { return dropped_.value(); }
  int64_t handed_over() const { return handed_over_.value(); }
  size_t in_flight() const { return in_flight_.size(); }

 private:
  // Sleeps until there is work (or a second passes); false once stopping
  // with nothing queued or in flight.
  bool AwaitWork(bool* stopping);
  // Connect() failed: gives back what was in flight and waits a little;
  // false when stopping.
  bool BrokerAway(const absl::Status& why, bool stopping);
  // Publishes queued messages while the window has room; returns how many
  // it took from the queue.
  size_t FillWindow();
  // Reads the broker's confirms and fails what was nacked, returned or
  // left unconfirmed too long.
  void SettleConfirms();
  // The connection failed: what was in flight may or may not have reached
  // the broker. It goes back to the front of the queue (published again
  // once the connection is back, unless recovery has taken it over by then)
  // and its failure is noted on the rows.
  void FailInFlight(const absl::Status& why);
  void ReportFailures();
  struct Queued {
    OutgoingMessage message;
    absl::Time since;  // the time its rows' first retry counts from
  };
  // Puts `items` back at the front of the queue, in order; when stopping
  // they are left to recovery instead.
  void Requeue(std::vector<Queued> items);
  // Drops from `batch` the messages recovery has re-published meanwhile (or
  // that are closed), counted and logged.
  void LeaveTakenOver(std::vector<Queued>& batch);

  MessagePublisher& broker_;
  OutboxRepository& outbox_;
  const Clock& clock_;
  const RelayOptions options_;
  Counter& confirmed_;
  Counter& failed_total_;
  Counter& dropped_;
  Counter& handed_over_;
  Counter& note_failures_;
  DurationHistogram& confirm_latency_;

  Mutex mu_;
  std::deque<Queued> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  // Owned by the publishing thread.
  ConfirmWindow<Queued> in_flight_;  // delivery tag -> message
  std::vector<std::string> failed_;  // not yet noted on their rows
  std::string error_;
  WorkerThread thread_;
};

}  // namespace outbox
