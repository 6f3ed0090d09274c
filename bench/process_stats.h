#pragma once

// What the processes under test cost, read from /proc: peak memory, and CPU
// time (user + system) over the measured window or over a whole run.
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"

namespace outbox::bench {

// Peak resident set (VmHWM) of a process, in MiB; NaN if unreadable.
double PeakRssMib(int pid);

// CPU time (user + system) a process has used so far, in seconds; NaN if
// unreadable. pid 0 is this process.
double CpuSeconds(int pid);

// CPU time the calling thread has used so far, in seconds.
double ThreadCpuSeconds();

// Context switches (voluntary and not) of all of a process's threads so far;
// NaN if unreadable. pid 0 is this process. Each is a thread going to sleep
// or being put off the CPU: the hand-offs between threads show here.
double ContextSwitches(int pid);

struct WatchedProcess {
  std::string name;
  std::string key;  // in the JSON figures
  int pid = 0;      // 0 = this process (the load generator)
};

// CPU seconds each process used from construction until Used() is called:
// a whole run's cost, warm-up and drain included.
class CpuMeter {
 public:
  explicit CpuMeter(std::vector<WatchedProcess> processes);
  const std::vector<WatchedProcess>& processes() const { return processes_; }
  // Element i: process i's CPU seconds since construction (NaN if unreadable).
  std::vector<double> Used() const;
  // Element i: process i's context switches since construction.
  std::vector<double> Switches() const;

 private:
  std::vector<WatchedProcess> processes_;
  std::vector<double> start_;
  std::vector<double> start_switches_;
};

// CPU use of the processes during [from, to), as a share of one core (100%
// = one core busy all the time), read on a thread of its own.
class CpuMonitor {
 public:
  CpuMonitor(std::vector<WatchedProcess> processes, absl::Time from, absl::Time to);
  ~CpuMonitor();
  // Waits for the window's end; element i is process i's percentage.
  const std::vector<double>& Percent();

 private:
  const std::vector<WatchedProcess> processes_;
  std::vector<double> percent_;
  std::thread thread_;
};

}  // namespace outbox::bench
