#pragma once

// A consumer that is not accounting: it takes every message from a queue and
// either drops it (acks and forgets: a consumer that lost what it took) or
// dead-letters it (rejects without requeue). Real AMQP on the test broker,
// on a thread of its own until destroyed.
#include <atomic>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "shared/base/internal/mutex.h"

namespace outbox::testing {

class QueueSink {
 public:
  enum class Mode { kDrop, kDeadLetter };
  // Returns once the consumer is registered with the broker. `queue_type`
  // is the services' QUEUE_TYPE (the queue is declared as they declare it).
  QueueSink(const std::string& amqp_url, const std::string& queue, Mode mode,
            const std::string& queue_type = "");
  ~QueueSink();

  int64_t taken() const { return taken_.load(); }

 private:
  void Run(const std::string& amqp_url, const std::string& queue, Mode mode,
           const std::string& queue_type);

  std::atomic<bool> stop_{false};
  std::atomic<bool> ready_{false};
  std::atomic<int64_t> taken_{0};
  Mutex mu_;
  std::string last_error_ ABSL_GUARDED_BY(mu_);  // why the last connect attempt failed
  std::thread thread_;
};

}  // namespace outbox::testing
