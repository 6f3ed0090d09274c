#include "shared/amqp/internal/amqp_dialer.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "shared/observability/log.h"

namespace outbox {
namespace {
// Between rounds of reconnect attempts: from 100 ms, doubling, up to 1 s, so
// that once a cut ends the next attempt is at most a second away (each
// attempt itself is bounded by kAmqpConnectTimeout).
constexpr absl::Duration kMinBackoff = absl::Milliseconds(100);
constexpr absl::Duration kMaxBackoff = absl::Seconds(1);
constexpr absl::Duration kQueueWait = absl::Milliseconds(250);  // a queue not declared yet
}  // namespace

AmqpDialer::AmqpDialer(AmqpUrl url, Topology topology, std::string name, Setup setup,
                       const Clock& clock)
    : url_(std::move(url)),
      topology_(std::move(topology)),
      name_(std::move(name)),
      setup_(std::move(setup)),
      clock_(clock) {}

absl::StatusOr<AmqpConnection*> AmqpDialer::Get() {
  if (conn_ != nullptr && conn_->healthy()) {
    counters_->up = true;
    return conn_.get();
  }
  if (conn_ != nullptr) Reset(absl::UnavailableError("connection broken"));
  if (clock_.Now() < next_attempt_) return absl::UnavailableError("amqp: waiting to reconnect");

  auto attempt = [&](const AmqpUrl& node) -> absl::StatusOr<std::unique_ptr<AmqpConnection>> {
    auto conn = AmqpConnection::Connect(node, name_);
    if (!conn.ok()) return conn.status();
    absl::Status s = (*conn)->DeclareTopology(topology_);
    if (s.ok() && setup_) s = setup_(**conn);
    if (!s.ok()) return s;
    return conn;
  };
  // One round: each node once, from the one after the last failure on.
  const size_t nodes = url_.Nodes().size();
  std::vector<std::string> errors;
  absl::StatusOr<std::unique_ptr<AmqpConnection>> conn = absl::UnavailableError("no node");
  for (size_t i = 0; i < nodes; ++i) {
    const AmqpUrl node = url_.Node(node_);
    conn = attempt(node);
    if (conn.ok()) break;
    const absl::string_view error = conn.status().message();
    errors.push_back(nodes == 1 || absl::StrContains(error, node.HostPort())
                         ? std::string(error)
                         : absl::StrCat(node.HostPort(), ": ", error));
    node_ = (node_ + 1) % nodes;
  }
  if (!conn.ok()) {
    // The broker answered but the queue to consume is not there yet: its
    // writer declares it (e.g. a consumer declares its reply queue on its
    // first start). Ask again soon rather than after a grown backoff, so the first
    // replies are not left waiting while their rows come due again.
    const bool queue_not_declared_yet = absl::IsNotFound(conn.status());
    backoff_ =
        queue_not_declared_yet ? kMinBackoff : std::clamp(backoff_ * 2, kMinBackoff, kMaxBackoff);
    next_attempt_ = clock_.Now() + (queue_not_declared_yet ? kQueueWait : backoff_);
    if (!logged_down_) {
      LogWarning("amqp_unavailable", {KV("connection", name_), KV("url", url_.Redacted()),
                                      KV("error", absl::StrJoin(errors, "; "))});
      logged_down_ = true;
    }
    return absl::Status(conn.status().code(), absl::StrJoin(errors, "; "));
  }
  conn_ = std::move(conn).value();
  counters_->up = true;
  backoff_ = absl::ZeroDuration();
  logged_down_ = false;
  LogInfo("amqp_connected",
          {KV("connection", name_), KV("node", node()), KV("url", url_.Redacted())});
  return conn_.get();
}

void AmqpDialer::Reset(const absl::Status& why) {
  counters_->up = false;
  if (conn_ == nullptr) return;
  ++counters_->drops;
  LogWarning("amqp_connection_lost",
             {KV("connection", name_), KV("node", node()), KV("error", why.message()),
              KV("drops", counters_->drops.load())});
  conn_.reset();
  // In a cluster the next attempt goes to another node first: this one may
  // be the one that is gone.
  node_ = (node_ + 1) % url_.Nodes().size();
  // The first reconnect is at once: a connection that died while idle (or
  // on one error) is replaced before its next use; if the broker is really
  // gone, that attempt fails and the backoff grows from there.
  backoff_ = absl::ZeroDuration();
  next_attempt_ = clock_.Now();
}

}  // namespace outbox
