#pragma once

// How refused gRPC calls are logged without letting a caller write a line
// per call: one `call_refused` line per peer address and method at most
// every `every`, and the calls of that peer and method refused meanwhile
// counted in the next one (`unlogged`; a count left when the refusals stop
// is not logged). A peer is its address without the port, so new
// connections do not make new peers. Past `max_keys` peers and methods, the
// calls of new ones share one line a period between them.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "shared/base/clock.h"
#include "shared/base/internal/mutex.h"
#include "shared/observability/log.h"

namespace outbox {

class RefusedCallLog {
 public:
  explicit RefusedCallLog(const Clock& clock, absl::Duration every = absl::Minutes(1),
                          size_t max_keys = 1024);

  // A call of `method` from `peer` (gRPC's "ipv4:10.0.0.7:51234") was
  // refused with `code` and `error`: logs it at `level` unless a line for
  // that peer address and method went out less than `every` ago.
  void Refused(LogLevel level, absl::string_view method, absl::string_view peer,
               absl::string_view code, absl::string_view error);

  // The address of a gRPC peer: "ipv4:10.0.0.7:51234" -> "ipv4:10.0.0.7",
  // "ipv6:[::1]:51234" -> "ipv6:[::1]"; anything else as it is.
  static std::string PeerAddress(absl::string_view peer);

 private:
  struct Key {
    std::string peer;
    std::string method;
    bool operator<(const Key& o) const {
      return std::tie(peer, method) < std::tie(o.peer, o.method);
    }
  };
  struct Seen {
    absl::Time logged_at;
    int64_t unlogged = 0;  // refused since the line at logged_at
  };

  const Clock& clock_;
  const absl::Duration every_;
  const size_t max_keys_;
  Mutex mu_;
  std::map<Key, Seen> seen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace outbox
