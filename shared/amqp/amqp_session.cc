#include "shared/amqp/amqp_session.h"

#include <algorithm>
#include <utility>

#include "shared/observability/log.h"

namespace outbox {
namespace {
constexpr absl::Duration kMinBackoff = absl::Milliseconds(100);
constexpr absl::Duration kMaxBackoff = absl::Seconds(5);
}  // namespace

AmqpSession::AmqpSession(AmqpUrl url, Topology topology, std::string name, Setup setup,
                         const Clock& clock)
    : url_(std::move(url)),
      topology_(std::move(topology)),
      name_(std::move(name)),
      setup_(std::move(setup)),
      clock_(clock) {}

absl::StatusOr<AmqpConnection*> AmqpSession::Get() {
  if (conn_ != nullptr && conn_->healthy()) {
    counters_->up = true;
    return conn_.get();
  }
  if (conn_ != nullptr) Reset(absl::UnavailableError("connection broken"));
  if (clock_.Now() < next_attempt_) return absl::UnavailableError("amqp: waiting to reconnect");

  auto attempt = [&]() -> absl::StatusOr<std::unique_ptr<AmqpConnection>> {
    auto conn = AmqpConnection::Connect(url_, name_);
    if (!conn.ok()) return conn.status();
    absl::Status s = (*conn)->DeclareTopology(topology_);
    if (s.ok() && setup_) s = setup_(**conn);
    if (!s.ok()) return s;
    return conn;
  };
  auto conn = attempt();
  if (!conn.ok()) {
    backoff_ = std::clamp(backoff_ * 2, kMinBackoff, kMaxBackoff);
    next_attempt_ = clock_.Now() + backoff_;
    if (!logged_down_) {
      LogWarning("amqp_unavailable", {KV("connection", name_), KV("url", url_.Redacted()),
                                      KV("error", conn.status().message())});
      logged_down_ = true;
    }
    return conn.status();
  }
  conn_ = std::move(conn).value();
  counters_->up = true;
  backoff_ = absl::ZeroDuration();
  logged_down_ = false;
  LogInfo("amqp_connected", {KV("connection", name_), KV("url", url_.Redacted())});
  return conn_.get();
}

void AmqpSession::Reset(const absl::Status& why) {
  counters_->up = false;
  if (conn_ == nullptr) return;
  ++counters_->drops;
  LogWarning("amqp_connection_lost", {KV("connection", name_), KV("error", why.message()),
                                      KV("drops", counters_->drops.load())});
  conn_.reset();
  // The first reconnect is at once: a connection that died while idle (or
  // on one error) is replaced before its next use; if the broker is really
  // gone, that attempt fails and the backoff grows from there.
  backoff_ = absl::ZeroDuration();
  next_attempt_ = clock_.Now();
}

}  // namespace outbox
