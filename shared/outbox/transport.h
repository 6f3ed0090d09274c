#pragma once

// The broker seam: what the workers need from a message transport. The AMQP
// adapters live in shared/amqp; fakes for unit tests in shared/testing.
// Implementations keep one connection each and reconnect on their own with
// backoff; they are not thread-safe (one per worker thread).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shared/base/clock.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/message.h"

namespace outbox {

class BrokerLink {
 public:
  virtual ~BrokerLink() = default;
  // OK when connected, connecting first if the reconnect backoff allows;
  // UNAVAILABLE while the broker cannot be reached (ask again a little later).
  virtual absl::Status Connect() = 0;
  virtual bool connected() const = 0;
  // Drops the connection after an error the caller saw; Connect() makes a
  // new one. What was unconfirmed or unacked on it is settled by the broker.
  virtual void Reset(const absl::Status& why) = 0;
  // Services an idle connection (heartbeats) and notices when it was closed.
  virtual absl::Status Poll(absl::Duration wait) = 0;
  // Safe to read from any thread (metrics): whether the last Connect() gave
  // a connection not reset since, and how many connections were lost (each
  // logged when noticed).
  virtual bool up() const = 0;
  virtual int64_t drops() const = 0;
};

// Connects, then polls once, so that a connection the broker closed while it
// sat idle is noticed and replaced now rather than failing the next publish.
absl::Status ConnectLive(BrokerLink& link);

// Runs `op` (returning a Status or StatusOr); if it fails, replaces the
// connection and runs it once more, so a connection that died under us does
// not count as the broker refusing. The second answer is the one returned.
template <typename Op>
auto OnceMoreOnAFreshConnection(BrokerLink& link, Op op) -> decltype(op()) {
  auto result = op();
  if (result.ok()) return result;
  link.Reset(result.status());
  if (link.Connect().ok()) result = op();
  return result;
}

// outbox_amqp_connected{connection=...} (1 while up) and
// outbox_amqp_connection_drops_total{connection=...}, read when scraped. The
// one place these families are registered (and their help written).
void RegisterConnectionMetrics(MetricsRegistry& metrics, const std::string& connection,
                               std::function<bool()> up, std::function<int64_t()> drops);
// The same for a BrokerLink.
void RegisterLinkMetrics(MetricsRegistry& metrics, const BrokerLink& link,
                         const std::string& connection);

// What a queue looks like to the broker right now.
struct QueueState {
  int64_t ready = 0;  // messages waiting for a consumer
  int consumers = 0;
};

// The broker's answer to one publish.
struct Confirm {
  uint64_t tag = 0;
  bool ok = false;          // acked and not returned
  bool unroutable = false;  // returned: no queue is bound to its topic
};

// Publishes with publisher confirms, pipelined: Publish returns a tag at once
// and ReadConfirms settles tags as the broker answers.
class MessagePublisher : public BrokerLink {
 public:
  // Persistent and mandatory (an unroutable message is returned, not lost).
  virtual absl::StatusOr<uint64_t> Publish(const OutgoingMessage& message) = 0;
  // Waits up to `wait` for confirms, then also takes those already arrived.
  virtual absl::Status ReadConfirms(absl::Duration wait, std::vector<Confirm>* settled) = 0;
  // Looks at a queue without changing it (a passive declare). NOT_FOUND when
  // it does not exist; the link stays usable.
  virtual absl::StatusOr<QueueState> Inspect(const std::string& queue) = 0;
};

// Consumes one queue with manual acknowledgement.
class MessageConsumer : public BrokerLink {
 public:
  // Waits up to `wait` for one delivery, then takes those already received,
  // up to `max` in all; empty when none arrived in time.
  virtual absl::StatusOr<std::vector<Delivery>> Next(size_t max, absl::Duration wait) = 0;
  virtual absl::Status Ack(uint64_t delivery_tag, bool multiple) = 0;
  // Rejects without requeue: the broker moves it to the dead-letter queue.
  virtual absl::Status Reject(uint64_t delivery_tag) = 0;
  virtual absl::Status Requeue(uint64_t delivery_tag, bool multiple) = 0;
};

// Parked messages one at a time, for an operator (the dead-letter queues):
// look, take, give back, send on.
class QueueBrowser : public BrokerLink {
 public:
  // As MessagePublisher::Inspect: NOT_FOUND when the queue does not exist;
  // the link stays usable.
  virtual absl::StatusOr<QueueState> Inspect(const std::string& queue) = 0;
  // Takes one message, unacknowledged (delivery_tag 0: the queue was empty).
  // What is taken and not acked goes back to its queue on Requeue or Reset.
  virtual absl::StatusOr<Delivery> Take(const std::string& queue) = 0;
  virtual absl::Status Ack(uint64_t delivery_tag) = 0;
  virtual absl::Status Requeue(uint64_t delivery_tag, bool multiple) = 0;
  // Publishes through `exchange` (persistent, mandatory) and waits up to
  // `timeout` for the broker: true only when it confirmed the message.
  virtual absl::StatusOr<bool> PublishConfirmed(const std::string& exchange,
                                                const OutgoingMessage& message,
                                                absl::Duration timeout) = 0;
  // The lock on `queue` that every browser holds while it takes from the
  // queue, across connections and processes: what another one has taken
  // and not yet given back is not ready, so Inspect would not count it.
  // true: this connection holds it now (also when it held it already);
  // false: another connection holds it. It goes with this connection, so
  // a process that dies leaves it free.
  virtual absl::StatusOr<bool> TryLock(const std::string& queue) = 0;
  // Gives the lock back (OK when this connection does not hold it).
  virtual absl::Status Unlock(const std::string& queue) = 0;
};

// Where a queue's dead letters go: "<queue>.DLQ" (declared by the AMQP
// adapter, named in logs and alerts).
inline std::string DeadLetterQueueOf(const std::string& queue) {
  return queue + ".DLQ";
}

// The broker's name of QueueBrowser::TryLock's lock on `queue`: the AMQP
// adapter holds it as an exclusive queue "<queue>.lock" of its connection
// (the broker refuses another connection's declare of it), which recovery's
// broker user may declare and delete (scripts/lib/broker_users.sh).
inline std::string LockQueueOf(const std::string& queue) {
  return queue + ".lock";
}

// Publishes every message without waiting in between, then waits up to
// `timeout` for all confirms. Element i of the result is message i's
// confirm (ok false when none came in time). A connection error is returned
// as a status: nothing counts as confirmed then.
absl::StatusOr<std::vector<Confirm>> PublishAndConfirm(MessagePublisher& publisher,
                                                       const std::vector<OutgoingMessage>& messages,
                                                       absl::Duration timeout, const Clock& clock);

}  // namespace outbox
