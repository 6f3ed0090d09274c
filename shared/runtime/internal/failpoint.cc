#include "shared/runtime/internal/failpoint.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace outbox {
namespace {

struct Armed {
  int64_t crash_at_hit = 1;
  std::atomic<int64_t> hits{0};
};

// Parsed once from the environment; never changes afterwards.
const std::map<std::string, std::unique_ptr<Armed>>& ArmedPoints() {
  static const auto* points = [] {
    auto* out = new std::map<std::string, std::unique_ptr<Armed>>();
    const char* env = std::getenv("OUTBOX_FAILPOINTS");
    if (env == nullptr) return out;
    for (absl::string_view entry : absl::StrSplit(env, absl::ByAnyChar(";,"), absl::SkipEmpty())) {
      std::vector<absl::string_view> kv = absl::StrSplit(entry, absl::MaxSplits('=', 1));
      if (kv.size() != 2) continue;
      absl::string_view action = kv[1];
      auto armed = std::make_unique<Armed>();
      if (!absl::ConsumePrefix(&action, "crash")) {
        std::fprintf(stderr, "failpoint: unknown action in '%.*s' (only crash[@N])\n",
                     static_cast<int>(entry.size()), entry.data());
        continue;
      }
      if (absl::ConsumePrefix(&action, "@") && !absl::SimpleAtoi(action, &armed->crash_at_hit)) {
        continue;
      }
      (*out)[std::string(absl::StripAsciiWhitespace(kv[0]))] = std::move(armed);
    }
    return out;
  }();
  return *points;
}

}  // namespace

void Failpoint(absl::string_view name) {
  const auto& points = ArmedPoints();
  if (points.empty()) return;
  auto it = points.find(std::string(name));
  if (it == points.end()) return;
  if (++it->second->hits < it->second->crash_at_hit) return;
  // One line so a test can tell what was injected, then die like a power cut.
  char line[256];
  const int n = std::snprintf(line, sizeof(line), "failpoint_crash point=%.*s hit=%lld\n",
                              static_cast<int>(name.size()), name.data(),
                              static_cast<long long>(it->second->hits.load()));
  if (n > 0) (void)!write(2, line, static_cast<size_t>(n));
  kill(getpid(), SIGKILL);
  _exit(137);
}

}  // namespace outbox
