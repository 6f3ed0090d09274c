#include "shared/runtime/signals.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <ctime>

namespace outbox {
namespace {

// The shutdown signal taken by any caller (0: none yet), so that each of
// ShutdownRequested and WaitForShutdownSignal sees the one the other took.
std::atomic<int> taken{0};

sigset_t ShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

// The signal taken, waiting up to `wait_ms` for a pending one; 0: none.
int Take(long wait_ms) {
  if (const int sig = taken.load()) return sig;
  const sigset_t set = ShutdownSignals();
  const timespec wait = {wait_ms / 1000, (wait_ms % 1000) * 1000000};
  const int sig = sigtimedwait(&set, nullptr, &wait);
  if (sig > 0) {
    int none = 0;
    taken.compare_exchange_strong(none, sig);
  }
  return taken.load();
}

}  // namespace

void BlockShutdownSignals() {
  signal(SIGPIPE, SIG_IGN);
  const sigset_t set = ShutdownSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

std::string WaitForShutdownSignal() {
  int sig = 0;
  // In slices, so that a signal ShutdownRequested took in another thread
  // ends this wait too.
  while ((sig = Take(200)) == 0) {
  }
  return sig == SIGTERM ? "SIGTERM" : "SIGINT";
}

bool ShutdownRequested() {
  return Take(0) != 0;
}

}  // namespace outbox
