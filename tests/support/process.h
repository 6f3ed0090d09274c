#pragma once

// Runs the real service binaries for end-to-end tests: spawn with an
// environment, read the log, stop with SIGTERM or kill with SIGKILL.
#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace outbox::testing {

class Process {
 public:
  Process() = default;
  ~Process();  // kills a process still running
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  // Starts `binary` with `args`; `env` is added to this process's environment.
  // stdout and stderr go to `log_path` (appended), stderr to `err_path`
  // instead when one is given.
  void Start(const std::string& binary, const std::vector<std::string>& args,
             const std::map<std::string, std::string>& env, const std::string& log_path,
             const std::string& err_path = "");

  // SIGTERM, then waits; returns the exit code (or 128+signal), -1 on timeout.
  // (Every timeout here is Scaled().)
  int Terminate(absl::Duration timeout = absl::Seconds(20));
  // SIGKILL, like a crash.
  void Kill();
  bool Running();
  // Waits for the process to exit by itself; its exit code, -1 on timeout.
  int WaitExit(absl::Duration timeout) { return Wait(timeout); }
  // The exit code of the last process that ended (128+signal if killed).
  int exit_code() const { return exit_code_; }
  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }

  // Waits until the log contains `needle`; returns the log's text or "" on timeout.
  std::string WaitForLog(const std::string& needle, absl::Duration timeout) const;
  std::string Log() const;

 private:
  int Wait(absl::Duration timeout);
  pid_t pid_ = -1;
  int exit_code_ = -1;
  std::string log_path_;
};

// What a command-line program did: its exit code (-1 if it had to be killed
// after the timeout) and what it printed on stdout and on stderr.
struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs `binary` to completion; its output files are `<out_prefix>.out` and
// `<out_prefix>.err` (overwritten).
CommandResult RunToCompletion(const std::string& binary, const std::vector<std::string>& args,
                              const std::map<std::string, std::string>& env,
                              const std::string& out_prefix,
                              absl::Duration timeout = absl::Seconds(30));

// Extracts "key=value" from the last log line of `event` (shared/log format).
std::string LogField(const std::string& log, const std::string& event, const std::string& key);

// How many times longer than in a normal build the tests' waits may take:
// OUTBOX_TEST_TIME_SCALE (a number >= 1; 1 when unset). Sanitizer builds run
// the services 2-15x slower; scripts/sanitize.sh configures them with the
// cmake variable of that name, which sets it for every test (and scales the
// ctest TIMEOUTs), so a normal build keeps its tight budgets.
double TimeScale();
// `d` times TimeScale(). Every wait in tests/support goes through it
// (PollUntil, WaitForLog, WaitExit, Terminate, RunToCompletion); a test
// scales its own deadlines (e.g. of a gRPC call) with it.
absl::Duration Scaled(absl::Duration d);
// A gRPC deadline `d` (scaled) from now.
std::chrono::system_clock::time_point DeadlineIn(absl::Duration d);

// Polls `done` every `interval` until it returns true or `timeout` (scaled)
// passes.
template <typename F>
bool PollUntil(F done, absl::Duration timeout, absl::Duration interval = absl::Milliseconds(100)) {
  const absl::Time deadline = absl::Now() + Scaled(timeout);
  while (true) {
    if (done()) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(interval);
  }
}

std::string MakeTempDir(const std::string& prefix);

}  // namespace outbox::testing
