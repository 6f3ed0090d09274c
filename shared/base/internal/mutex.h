#pragma once

// The mutex, scoped lock and notification our code uses: absl's, except under
// ThreadSanitizer. Debian's libabsl is not built with -fsanitize=thread, so
// TSan sees neither absl::Mutex's Lock/Unlock nor the atomics inside it and
// reports races on every field the mutex guards. Under TSan these are small
// types over std::mutex and std::condition_variable, whose pthread calls TSan
// intercepts, with the same interface (the part we use) and annotations.
// Header-only: any target may include it (it needs absl::synchronization).
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

#if defined(__SANITIZE_THREAD__)
#define OUTBOX_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define OUTBOX_TSAN 1
#endif
#endif

#ifdef OUTBOX_TSAN
#include <condition_variable>
#include <mutex>
#endif

namespace outbox {

#ifndef OUTBOX_TSAN

using Mutex = absl::Mutex;
using MutexLock = absl::MutexLock;
using Notification = absl::Notification;

#else

// absl::Mutex's semantics for Await: the caller holds the lock; it is released
// while waiting and held again on return, with the condition true (or the
// time up). absl re-evaluates waiters' conditions whenever the lock is
// released, so Unlock and every wait wake all waiters to re-check.
class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    changed_.notify_all();
    mu_.unlock();
  }
  void AssertHeld() const ABSL_ASSERT_EXCLUSIVE_LOCK() {}

  void Await(const absl::Condition& cond) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    changed_.notify_all();
    while (!cond.Eval()) changed_.wait(lock);
    lock.release();
  }
  bool AwaitWithTimeout(const absl::Condition& cond, absl::Duration timeout) {
    return AwaitWithDeadline(cond, absl::Now() + timeout);
  }
  bool AwaitWithDeadline(const absl::Condition& cond, absl::Time deadline) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    changed_.notify_all();
    bool met = cond.Eval();
    while (!met) {
      if (changed_.wait_until(lock, absl::ToChronoTime(deadline)) == std::cv_status::timeout) {
        met = cond.Eval();
        break;
      }
      met = cond.Eval();
    }
    lock.release();
    return met;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

class Notification {
 public:
  void Notify() {
    MutexLock lock(&mu_);
    notified_ = true;
  }
  bool HasBeenNotified() const {
    MutexLock lock(&mu_);
    return notified_;
  }
  void WaitForNotification() const {
    MutexLock lock(&mu_);
    mu_.Await(absl::Condition(&notified_));
  }
  bool WaitForNotificationWithTimeout(absl::Duration timeout) const {
    MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&notified_), timeout);
  }

 private:
  mutable Mutex mu_;
  bool notified_ ABSL_GUARDED_BY(mu_) = false;
};

#endif

}  // namespace outbox
