#pragma once

// Counts fsync and fdatasync calls with the kernel's syscall tracepoints, as
// the load curve's `perf stat` does (counters in the kernel: no stop per
// call, so the CPU figures read alongside stay true). Needs tracefs and the
// right to open tracepoint events (root, or kernel.perf_event_paranoid
// -1); without them the count is NaN.
#include <vector>

namespace outbox::bench {

class FsyncCounter {
 public:
  // pid 0: the calling thread only. Otherwise every thread the process has
  // when the counter is made (threads it starts later are not counted).
  explicit FsyncCounter(int pid);
  ~FsyncCounter();
  FsyncCounter(const FsyncCounter&) = delete;
  FsyncCounter& operator=(const FsyncCounter&) = delete;

  // fsync + fdatasync calls since construction; NaN if they cannot be counted.
  double Count() const;

 private:
  std::vector<int> fds_;
  bool counting_ = false;
};

}  // namespace outbox::bench
