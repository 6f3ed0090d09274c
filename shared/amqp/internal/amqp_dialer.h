#pragma once

// Keeps one AMQP connection alive for one worker thread: connects on demand,
// declares the topology, runs the worker's own setup (confirm mode, consume),
// and after a failure waits with exponential backoff before reconnecting.
// Losing the broker never ends the worker. With several nodes in the URL, an
// attempt tries them in turn, starting after the one that failed last; the
// backoff applies to a whole round.
#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shared/amqp/internal/amqp_client.h"
#include "shared/base/clock.h"

namespace outbox {

class AmqpDialer {
 public:
  using Setup = std::function<absl::Status(AmqpConnection&)>;

  AmqpDialer(AmqpUrl url, Topology topology, std::string name, Setup setup,
             const Clock& clock = SystemClock::Get());

  // A healthy connection, or UNAVAILABLE while the broker is unreachable or
  // the backoff has not elapsed (the caller waits a little and asks again).
  // A refusal by the broker keeps its code: NOT_FOUND when the setup
  // consumes a queue not declared yet (then the next attempt is in 250 ms,
  // not after a grown backoff), PERMISSION_DENIED, ...
  absl::StatusOr<AmqpConnection*> Get();

  // Drops the connection after an error; the next Get() reconnects later.
  void Reset(const absl::Status& why);

  bool connected() const { return conn_ != nullptr && conn_->healthy(); }
  // Readable from any thread (metrics).
  bool up() const { return counters_->up.load(); }
  int64_t drops() const { return counters_->drops.load(); }
  const Topology& topology() const { return topology_; }
  // "host:port" of the node connected to (or to be tried next).
  std::string node() const { return url_.Node(node_).HostPort(); }

 private:
  AmqpUrl url_;
  Topology topology_;
  std::string name_;
  Setup setup_;
  const Clock& clock_;
  std::unique_ptr<AmqpConnection> conn_;
  size_t node_ = 0;  // index into url_.Nodes(): connected, or the next to try
  absl::Duration backoff_ = absl::ZeroDuration();
  absl::Time next_attempt_ = absl::InfinitePast();
  bool logged_down_ = false;
  struct Counters {  // on the heap so that the dialer stays movable
    std::atomic<bool> up{false};
    std::atomic<int64_t> drops{0};
  };
  std::unique_ptr<Counters> counters_ = std::make_unique<Counters>();
};

}  // namespace outbox
