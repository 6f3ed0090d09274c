#pragma once

// The fast path: publishes messages handed over right after their commit,
// pipelined (a window of unconfirmed messages), on its own thread and AMQP
// connection. It never marks anything: a row stays SENDING until accounting
// acknowledges it, so a nack, a timeout or a lost connection only leaves the
// row for the recovery service (and the failure is noted on the row).
#include <atomic>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "shared/amqp_session.h"

namespace outbox::payment {

struct PublisherOptions {
  size_t window = 256;          // unconfirmed messages in flight
  size_t capacity = 50'000;     // queued while the broker is away; beyond, left to recovery
  absl::Duration confirm_timeout = absl::Seconds(5);
};

struct PublisherStats {
  int64_t confirmed = 0;
  int64_t failed = 0;
  int64_t dropped = 0;
};

class FastPublisher {
 public:
  using OnFailure = std::function<void(const std::vector<std::string>& message_ids,
                                       const std::string& error)>;

  FastPublisher(AmqpUrl url, Topology topology, PublisherOptions options, OnFailure on_failure);
  ~FastPublisher();

  void Start();
  void Stop();  // publishes what is queued if the broker is there, then stops

  // Never blocks the caller.
  void Enqueue(std::vector<OutgoingMessage> messages);

  PublisherStats stats() const;
  bool connected() const { return connected_.load(); }

 private:
  void Run();

  AmqpSession session_;
  const PublisherOptions options_;
  const OnFailure on_failure_;

  mutable absl::Mutex mu_;
  std::deque<OutgoingMessage> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  PublisherStats stats_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> connected_{false};
  std::thread thread_;
};

}  // namespace outbox::payment
