#include "bench/process_stats.h"

#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace outbox::bench {

double PeakRssMib(int pid) {
  if (pid <= 0) return NAN;
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, "VmHWM:")) continue;
    std::vector<std::string> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t kib = 0;
    if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &kib))
      return static_cast<double>(kib) / 1024.0;
  }
  return NAN;
}

double CpuSeconds(int pid) {
  std::ifstream in(pid == 0 ? std::string("/proc/self/stat")
                            : absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t comm_end = stat.rfind(')');  // the command name may hold spaces
  if (comm_end == std::string::npos) return NAN;
  std::vector<std::string> f = absl::StrSplit(stat.substr(comm_end + 2), ' ', absl::SkipEmpty());
  // After the name: state is field 3 of stat(5), utime 14 and stime 15.
  int64_t utime = 0, stime = 0;
  if (f.size() < 13 || !absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime))
    return NAN;
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double ThreadCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

double ContextSwitches(int pid) {
  const std::string dir = pid == 0 ? "/proc/self/task" : absl::StrCat("/proc/", pid, "/task");
  std::error_code error;
  double total = 0;
  bool any = false;
  for (const auto& task : std::filesystem::directory_iterator(dir, error)) {
    std::ifstream in(task.path() / "status");
    std::string line;
    while (std::getline(in, line)) {
      absl::string_view rest = line;
      if (!absl::ConsumePrefix(&rest, "voluntary_ctxt_switches:") &&
          !absl::ConsumePrefix(&rest, "nonvoluntary_ctxt_switches:")) {
        continue;
      }
      int64_t n = 0;
      if (absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &n)) {
        total += static_cast<double>(n);
        any = true;
      }
    }
  }
  return any ? total : NAN;
}

CpuMeter::CpuMeter(std::vector<WatchedProcess> processes) : processes_(std::move(processes)) {
  for (const WatchedProcess& p : processes_) {
    start_.push_back(CpuSeconds(p.pid));
    start_switches_.push_back(ContextSwitches(p.pid));
  }
}

std::vector<double> CpuMeter::Switches() const {
  std::vector<double> n;
  for (size_t i = 0; i < processes_.size(); ++i) {
    n.push_back(ContextSwitches(processes_[i].pid) - start_switches_[i]);
  }
  return n;
}

std::vector<double> CpuMeter::Used() const {
  std::vector<double> used;
  for (size_t i = 0; i < processes_.size(); ++i) {
    used.push_back(CpuSeconds(processes_[i].pid) - start_[i]);
  }
  return used;
}

CpuMonitor::CpuMonitor(std::vector<WatchedProcess> processes, absl::Time from, absl::Time to)
    : processes_(std::move(processes)), percent_(processes_.size(), NAN) {
  thread_ = std::thread([this, from, to] {
    absl::SleepFor(from - absl::Now());
    const CpuMeter meter(processes_);
    absl::SleepFor(to - absl::Now());
    const double wall = absl::ToDoubleSeconds(to - from);
    const std::vector<double> used = meter.Used();
    for (size_t i = 0; i < used.size(); ++i) percent_[i] = 100 * used[i] / wall;
  });
}

CpuMonitor::~CpuMonitor() {
  if (thread_.joinable()) thread_.join();
}

const std::vector<double>& CpuMonitor::Percent() {
  if (thread_.joinable()) thread_.join();
  return percent_;
}

}  // namespace outbox::bench
