#include "tests/support/process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

extern char** environ;

namespace outbox::testing {

double TimeScale() {
  static const double scale = [] {
    const char* text = std::getenv("OUTBOX_TEST_TIME_SCALE");
    double v = 1;
    if (text == nullptr || *text == '\0') return v;
    if (!absl::SimpleAtod(text, &v) || !(v >= 1)) {
      std::fprintf(stderr, "FATAL: OUTBOX_TEST_TIME_SCALE=%s is not a number >= 1\n", text);
      std::abort();
    }
    return v;
  }();
  return scale;
}

absl::Duration Scaled(absl::Duration d) {
  return d * TimeScale();
}

std::chrono::system_clock::time_point DeadlineIn(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + Scaled(d));
}

Process::~Process() {
  if (pid_ > 0) {
    Kill();
  }
}

void Process::Start(const std::string& binary, const std::vector<std::string>& args,
                    const std::map<std::string, std::string>& env, const std::string& log_path,
                    const std::string& err_path) {
  log_path_ = log_path;
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    if (env.count(key) == 0) envs.push_back(kv);
  }
  for (const auto& [k, v] : env) envs.push_back(absl::StrCat(k, "=", v));
  std::vector<char*> argv{const_cast<char*>(binary.c_str())};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (std::string& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);

  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    if (!err_path.empty()) {
      int err_fd = open(err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (err_fd >= 0) dup2(err_fd, 2);
    }
    // The child must not inherit a blocked SIGTERM from the test runner.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(binary.c_str(), argv.data(), envp.data());
    _exit(127);
  }
}

int Process::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + Scaled(timeout);
  while (true) {
    int status = 0;
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return exit_code_;
    }
    if (absl::Now() >= deadline) return -1;
    absl::SleepFor(absl::Milliseconds(20));
  }
}

int Process::Terminate(absl::Duration timeout) {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int code = Wait(timeout);
  if (code == -1) Kill();
  return code;
}

void Process::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  Wait(absl::Seconds(10));
}

bool Process::Running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) == pid_) {
    pid_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }
  return true;
}

std::string Process::Log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Process::WaitForLog(const std::string& needle, absl::Duration timeout) const {
  std::string log;
  bool found = PollUntil(
      [&] {
        log = Log();
        return log.find(needle) != std::string::npos;
      },
      timeout, absl::Milliseconds(50));
  return found ? log : "";
}

CommandResult RunToCompletion(const std::string& binary, const std::vector<std::string>& args,
                              const std::map<std::string, std::string>& env,
                              const std::string& out_prefix, absl::Duration timeout) {
  const std::string out_path = out_prefix + ".out", err_path = out_prefix + ".err";
  std::remove(out_path.c_str());
  std::remove(err_path.c_str());
  Process p;
  p.Start(binary, args, env, out_path, err_path);
  CommandResult r;
  r.exit_code = p.WaitExit(timeout);
  if (r.exit_code == -1) p.Kill();
  auto read = [](const std::string& path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  r.out = read(out_path);
  r.err = read(err_path);
  return r;
}

std::string LogField(const std::string& log, const std::string& event, const std::string& key) {
  size_t at = log.rfind(absl::StrCat(" ", event, " "));  // the latest start wins
  if (at == std::string::npos) return "";
  const size_t end = log.find('\n', at);
  const std::string line = log.substr(at, end == std::string::npos ? std::string::npos : end - at);
  const std::string prefix = absl::StrCat(" ", key, "=");
  size_t k = line.find(prefix);
  if (k == std::string::npos) return "";
  k += prefix.size();
  return line.substr(k, line.find(' ', k) - k);
}

std::string MakeTempDir(const std::string& prefix) {
  std::string tmpl =
      absl::StrCat(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp", "/", prefix, ".XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

}  // namespace outbox::testing
