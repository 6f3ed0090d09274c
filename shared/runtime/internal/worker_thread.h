#pragma once

// The thread shell every worker shares: Start runs one step after another
// until the step says it is done; Stop asks it to finish and joins. A step
// checks stopping() and sleeps through Sleep(), which a stop cuts short.
#include <functional>
#include <thread>

#include "absl/time/time.h"
#include "shared/base/internal/mutex.h"

namespace outbox {

class WorkerThread {
 public:
  WorkerThread() = default;
  ~WorkerThread() { Stop(); }
  WorkerThread(const WorkerThread&) = delete;
  WorkerThread& operator=(const WorkerThread&) = delete;

  // `step` returns false when the worker is done (normally: once stopping()).
  void Start(std::function<bool()> step) {
    thread_ = std::thread([this, step = std::move(step)] {
      while (step()) {
      }
    });
  }
  void RequestStop() {
    if (!stop_.HasBeenNotified()) stop_.Notify();
  }
  void Stop() {
    RequestStop();
    if (thread_.joinable()) thread_.join();
  }
  bool stopping() const { return stop_.HasBeenNotified(); }
  // Waits up to `d`; false when a stop was requested meanwhile.
  bool Sleep(absl::Duration d) const { return !stop_.WaitForNotificationWithTimeout(d); }

 private:
  Notification stop_;
  std::thread thread_;
};

}  // namespace outbox
