#include "bench/fsync_counter.h"

#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace outbox::bench {
namespace {

// The tracepoint's id, from tracefs wherever it is mounted; 0 if unknown.
uint64_t TracepointId(const char* event) {
  for (const char* root : {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"}) {
    std::ifstream in(absl::StrCat(root, "/events/syscalls/", event, "/id"));
    std::string text;
    uint64_t id = 0;
    if (std::getline(in, text) && absl::SimpleAtoi(text, &id)) return id;
  }
  return 0;
}

int OpenCounter(uint64_t tracepoint, int tid) {
  perf_event_attr attr{};
  attr.type = PERF_TYPE_TRACEPOINT;
  attr.size = sizeof(attr);
  attr.config = tracepoint;
  return static_cast<int>(syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC));
}

}  // namespace

FsyncCounter::FsyncCounter(int pid) {
  const uint64_t fsync = TracepointId("sys_enter_fsync");
  const uint64_t fdatasync = TracepointId("sys_enter_fdatasync");
  if (fsync == 0 || fdatasync == 0) return;
  std::vector<int> tids;
  if (pid == 0) {
    tids.push_back(0);  // perf_event_open's "the calling thread"
  } else {
    std::error_code error;
    for (const auto& task :
         std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"), error)) {
      int tid = 0;
      if (absl::SimpleAtoi(task.path().filename().string(), &tid)) tids.push_back(tid);
    }
  }
  // A thread that ends before its counter opens is simply not counted.
  for (int tid : tids) {
    for (uint64_t tracepoint : {fsync, fdatasync}) {
      const int fd = OpenCounter(tracepoint, tid);
      if (fd >= 0) fds_.push_back(fd);
    }
  }
  counting_ = !fds_.empty();
}

FsyncCounter::~FsyncCounter() {
  for (int fd : fds_) close(fd);
}

double FsyncCounter::Count() const {
  if (!counting_) return NAN;
  uint64_t total = 0;
  for (int fd : fds_) {
    uint64_t n = 0;
    if (read(fd, &n, sizeof(n)) != static_cast<ssize_t>(sizeof(n))) return NAN;
    total += n;
  }
  return static_cast<double>(total);
}

}  // namespace outbox::bench
