#pragma once

// The publishes awaiting their broker confirms, by delivery tag: what a
// publisher with a sliding window of unconfirmed messages keeps (the
// producer's relay, the consumer's replies). Each entry carries what its owner needs
// once the confirm comes (a message id, the delivery to ack). Not
// thread-safe: it belongs to the publishing thread.
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "shared/outbox/transport.h"

namespace outbox {

template <typename T>
class ConfirmWindow {
 public:
  struct Settled {
    T item;
    Confirm confirm;
    absl::Time sent;  // when it was published
  };

  void Add(uint64_t tag, T item, absl::Time sent) { in_flight_[tag] = {std::move(item), sent}; }
  size_t size() const { return in_flight_.size(); }
  bool empty() const { return in_flight_.empty(); }

  // Takes the entries the broker answered, in the order of `confirms`; tags
  // not in the window (forgotten after a failure) are skipped.
  std::vector<Settled> Settle(const std::vector<Confirm>& confirms) {
    std::vector<Settled> settled;
    settled.reserve(confirms.size());
    for (const Confirm& c : confirms) {
      auto it = in_flight_.find(c.tag);
      if (it == in_flight_.end()) continue;
      settled.push_back({std::move(it->second.first), c, it->second.second});
      in_flight_.erase(it);
    }
    return settled;
  }

  // True when the oldest unanswered publish went out more than `timeout`
  // before `now`: the connection is stuck.
  bool Overdue(absl::Time now, absl::Duration timeout) const {
    return !in_flight_.empty() && now - in_flight_.begin()->second.second > timeout;
  }

  // Empties the window (the connection is gone: no confirm will come),
  // returning the entries in tag order.
  std::vector<T> TakeAll() {
    std::vector<T> items;
    items.reserve(in_flight_.size());
    for (auto& [tag, entry] : in_flight_) items.push_back(std::move(entry.first));
    in_flight_.clear();
    return items;
  }

 private:
  std::map<uint64_t, std::pair<T, absl::Time>> in_flight_;
};

}  // namespace outbox
