#include "shared/runtime/signals.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <thread>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace outbox {
namespace {

// What a signal does is the process's own: each case runs in a child.

// A work loop on another thread polls; SIGTERM sent to the process ends it,
// and the main thread's wait returns the same signal at once.
void PollThenWait() {
  BlockShutdownSignals();
  if (ShutdownRequested()) std::_Exit(1);
  std::atomic<bool> seen{false};
  std::thread loop([&] {
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (!ShutdownRequested() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
    seen = ShutdownRequested();
  });
  kill(getpid(), SIGTERM);
  loop.join();
  if (!seen) std::_Exit(2);
  if (!ShutdownRequested()) std::_Exit(3);  // it stays true
  std::_Exit(WaitForShutdownSignal() == "SIGTERM" ? 0 : 4);
}

TEST(SignalsDeathTest, AWorkLoopPollsAndTheWaitSeesTheSameSignal) {
  EXPECT_EXIT(PollThenWait(), ::testing::ExitedWithCode(0), "");
}

// The wait takes the signal first; the poll sees it after.
void WaitThenPoll() {
  BlockShutdownSignals();
  kill(getpid(), SIGINT);
  if (WaitForShutdownSignal() != "SIGINT") std::_Exit(1);
  std::_Exit(ShutdownRequested() ? 0 : 2);
}

TEST(SignalsDeathTest, APollSeesTheSignalTheWaitTook) {
  EXPECT_EXIT(WaitThenPoll(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace outbox
