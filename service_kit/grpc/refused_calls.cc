#include "service_kit/grpc/refused_calls.h"

#include "absl/strings/match.h"

namespace outbox {

RefusedCallLog::RefusedCallLog(const Clock& clock, absl::Duration every, size_t max_keys)
    : clock_(clock), every_(every), max_keys_(max_keys) {}

std::string RefusedCallLog::PeerAddress(absl::string_view peer) {
  if (!absl::StartsWith(peer, "ipv4:") && !absl::StartsWith(peer, "ipv6:")) {
    return std::string(peer);
  }
  const size_t colon = peer.rfind(':');
  // "ipv6:[::1]:51234": the port follows the bracket.
  if (colon == absl::string_view::npos || colon < 5 ||
      (absl::StartsWith(peer, "ipv6:[") && peer[colon - 1] != ']')) {
    return std::string(peer);
  }
  return std::string(peer.substr(0, colon));
}

void RefusedCallLog::Refused(LogLevel level, absl::string_view method, absl::string_view peer,
                             absl::string_view code, absl::string_view error) {
  const absl::Time now = clock_.Now();
  Key key{PeerAddress(peer), std::string(method)};
  int64_t unlogged = 0;
  {
    MutexLock lock(&mu_);
    auto it = seen_.find(key);
    if (it == seen_.end() && seen_.size() >= max_keys_) {
      // Forget the keys whose period is over with nothing left to report.
      for (auto i = seen_.begin(); i != seen_.end();) {
        i = i->second.unlogged == 0 && now - i->second.logged_at >= every_ ? seen_.erase(i)
                                                                           : std::next(i);
      }
      if (seen_.size() >= max_keys_) key = Key{"", ""};  // the others, together
      it = seen_.find(key);
    }
    if (it != seen_.end() && now - it->second.logged_at < every_) {
      ++it->second.unlogged;
      return;
    }
    if (it == seen_.end()) it = seen_.emplace(key, Seen{}).first;
    unlogged = it->second.unlogged;
    it->second = Seen{now, 0};
  }
  Log(level, "call_refused",
      {KV("method", method), KV("peer", peer), KV("code", code), KV("error", error),
       KV("unlogged", unlogged)});
}

}  // namespace outbox
