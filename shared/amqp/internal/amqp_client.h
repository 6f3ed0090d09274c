#pragma once

// A thin, checked wrapper around one rabbitmq-c connection with one channel.
// rabbitmq-c connections are not thread-safe: each thread owns its own
// AmqpConnection.
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "shared/amqp/amqp_url.h"
#include "shared/outbox/message.h"
#include "shared/outbox/transport.h"

struct amqp_table_t_;  // rabbitmq-c's amqp_table_t (<amqp.h>, private to the .cc)

namespace outbox {

// A queue declared through a named exchange (Topology::exchange) is bound
// to it by its own name, and its dead letters go through
// DeadLetterExchangeOf(exchange) into "<queue>.DLQ". One exchange per writer
// lets broker permissions decide who may feed which queue: a user that may
// write the default exchange reaches every queue.
std::string DeadLetterExchangeOf(const std::string& exchange);

// The status code for the reply code of a channel.close or connection.close
// the broker sent in answer to a request: 404 NOT_FOUND -> NOT_FOUND,
// 403 ACCESS_REFUSED and 530 NOT_ALLOWED -> PERMISSION_DENIED,
// 406 PRECONDITION_FAILED and 405 RESOURCE_LOCKED -> FAILED_PRECONDITION,
// 506 RESOURCE_ERROR -> RESOURCE_EXHAUSTED, 540 -> UNIMPLEMENTED, the
// protocol errors (501-505, 541) -> INTERNAL; anything else (0 for a socket
// or library error, 320 CONNECTION_FORCED) -> UNAVAILABLE. Callers test the
// code (absl::IsNotFound), never the message.
absl::StatusCode StatusCodeOfAmqpReply(int reply_code);

// What a connection declares at connect and where it publishes. Only the
// side that writes a queue declares it (with its DLQ) and binds it, since a
// user that may bind a queue to an exchange it writes may feed that queue.
// Which queues exist is the services' business (service_kit/service_config.h).
// The x-delivery-limit of a quorum dead-letter queue. A quorum queue counts
// every return of a message (a nack, a reject, a closed channel: each look
// of the sweep and of a listing) and drops it past the limit, 20 by default
// on RabbitMQ 4.0, since a DLQ has nowhere to dead-letter to. What is parked
// must stay until an operator acts, so the limit is the largest value both
// broker lines read as a limit: -1 means none to 4.0 but drops a message at
// its first return on 3.10, and so does 0. At one look a second it lasts 68
// years.
inline constexpr int64_t kDeadLetterDeliveryLimit = 2147483647;

struct Topology {
  std::vector<std::string> queues;  // declared durable and bound to `exchange`
  std::string queue_type;           // empty: broker default; "quorum" for clusters
  // Publish() sends through it. Empty: the default exchange, and declared
  // queues dead-letter through it too (tests and bench, as the admin user).
  std::string exchange;
  // Non-empty: `queues` are the shards of one queue group. `exchange` routes
  // `hash_routing_key` (the group's name) to this x-consistent-hash exchange,
  // which sends each message to one shard by the hash of its kShardKeyHeader
  // header, so every copy of a message lands on the same shard. Each shard
  // stays bound to `exchange` by its own name as well: a dead letter is
  // re-driven to the shard it came from (a sharded consumer).
  std::string hash_exchange;
  std::string hash_routing_key;

  static std::string DeadLetterQueue(const std::string& queue) { return DeadLetterQueueOf(queue); }
};

// How soon a connection notices a dead link and a reconnect gives up, so
// that a network cut heals within seconds of its end whichever way the link
// failed (docs/design.md, "Noticing a dead link"):
// - AmqpUrl::heartbeat (kAmqpHeartbeat unless set), negotiated with the
//   broker: a connection that receives nothing (not even the broker's
//   heartbeats) for two of them is dead, and the broker closes one that
//   sends nothing for two of them. rabbitmq-c sends heartbeats only while
//   the connection is used, so an idle one is polled (BrokerLink::Poll).
// - kAmqpUserTimeout (TCP_USER_TIMEOUT): data sent and not acknowledged by
//   the peer's TCP for that long closes the socket, so a link that swallows
//   what we send (a one-way cut) fails the next send or read at once, rather
//   than after TCP's own retransmissions (minutes).
// - kAmqpConnectTimeout: a TCP connect (with the TLS handshake) to a host
//   that does not answer gives up after it, and the dialer tries again (or
//   the next node) after its backoff, on a fresh socket, instead of waiting
//   on SYN retransmissions that double up to 31 s.
inline constexpr absl::Duration kAmqpUserTimeout = absl::Seconds(5);
inline constexpr absl::Duration kAmqpConnectTimeout = absl::Seconds(2);

class AmqpConnection {
 public:
  // Dials url.host:url.port only (AmqpDialer does the failover).
  // Over TLS when url.tls, verifying the broker. UNAVAILABLE when the broker
  // cannot be reached, refuses the login or fails the TLS handshake (the
  // message says why, e.g. "certificate verify failed: ...").
  // `timeout` bounds the AMQP handshake and every later RPC; the TCP connect
  // (and TLS handshake) gives up after at most kAmqpConnectTimeout (TLS:
  // twice that, a handshake on a busy host takes longer).
  static absl::StatusOr<std::unique_ptr<AmqpConnection>> Connect(
      const AmqpUrl& url, const std::string& connection_name,
      absl::Duration timeout = absl::Seconds(5));
  ~AmqpConnection();
  AmqpConnection(const AmqpConnection&) = delete;
  AmqpConnection& operator=(const AmqpConnection&) = delete;

  // Declares a durable queue that dead-letters into its DLQ, and the DLQ.
  // With an `exchange`, also that exchange and its dead-letter exchange
  // (durable, direct) and the bindings, each by the queue's own name. A
  // quorum DLQ gets x-delivery-limit kDeadLetterDeliveryLimit; one declared
  // earlier without it is taken as it is, with a warning
  // (dead_letter_queue_delivery_limited).
  absl::Status DeclareQueue(const std::string& queue, const std::string& queue_type,
                            const std::string& exchange = "");
  // Declares the topology's queues and publishes through its exchange.
  absl::Status DeclareTopology(const Topology& topology);
  // Routes `exchange` to `queue` by the queue's own name.
  absl::Status Bind(const std::string& queue, const std::string& exchange);
  absl::Status Bind(const std::string& queue, const std::string& exchange,
                    const std::string& routing_key);
  // The exchange Publish() sends through ("" = the default exchange).
  void PublishThrough(std::string exchange) { exchange_ = std::move(exchange); }

  // Puts the channel in publisher-confirm mode.
  absl::Status EnableConfirms();

  // Publish() sends persistent messages (delivery mode 2) unless told
  // otherwise here; the services never do, the bench measures what
  // persistence costs the broker.
  void PublishPersistent(bool persistent) { persistent_ = persistent; }

  // A sliding window of publisher confirms: Publish sends one message
  // (persistent, mandatory) and returns its delivery tag at once;
  // ReadConfirms waits up to `wait` for the broker to settle some, then also
  // takes whatever else has already arrived. A message counts as confirmed
  // only if it was acked and not returned as unroutable.
  absl::StatusOr<uint64_t> Publish(const OutgoingMessage& message);
  absl::Status ReadConfirms(absl::Duration wait, std::vector<Confirm>* settled);
  size_t unconfirmed() const;

  // Publishes every message without waiting in between, then waits up to
  // `timeout` for all confirms. Element i of the result is true only if
  // message i was confirmed; `unroutable`, when given, tells which were
  // returned because no queue has their routing key. A connection error is
  // returned as a status: nothing is confirmed then.
  absl::StatusOr<std::vector<bool>> PublishConfirmed(const std::vector<OutgoingMessage>& messages,
                                                     absl::Duration timeout,
                                                     std::vector<bool>* unroutable = nullptr);

  // Starts consuming `queue` with manual acks and the given prefetch.
  // NOT_FOUND when there is no such queue, PERMISSION_DENIED when the user
  // may not read it (StatusCodeOfAmqpReply); the connection is unusable then.
  absl::Status Consume(const std::string& queue, int prefetch);

  // Waits up to `wait` for one delivery, then takes those already received,
  // up to `max` in all. An empty result means none arrived in time.
  absl::StatusOr<std::vector<Delivery>> NextDeliveries(size_t max, absl::Duration wait);

  absl::Status Ack(uint64_t delivery_tag, bool multiple);
  // Rejects without requeue: the broker dead-letters the message.
  absl::Status Reject(uint64_t delivery_tag);
  // Returns the message to its queue.
  absl::Status Requeue(uint64_t delivery_tag, bool multiple);

  // Lets the library exchange heartbeats and notice a closed connection while
  // the owner has nothing to do.
  absl::Status Poll(absl::Duration wait);

  // Messages ready in `queue` and its consumers (passive declare, on a
  // channel of its own). NOT_FOUND when there is no such queue; the
  // connection stays usable.
  absl::StatusOr<QueueState> Inspect(const std::string& queue);
  // QueueBrowser::TryLock: declares LockQueueOf(queue) exclusive (so
  // transient: RabbitMQ 4.0 deprecates transient queues that are not
  // exclusive, not these) and classic, on the inspect channel. false while
  // another connection holds it: the broker refuses the declare with 405
  // RESOURCE_LOCKED, which closes only that channel. The broker deletes it
  // with this connection.
  absl::StatusOr<bool> Lock(const std::string& queue);
  // Deletes the lock Lock took; OK when this connection holds none on `queue`.
  absl::Status Unlock(const std::string& queue);
  // Number of messages ready in `queue`, for tests and ops.
  absl::StatusOr<uint32_t> MessageCount(const std::string& queue);
  absl::Status DeleteQueue(const std::string& queue);
  // Drops every ready message of `queue`; returns how many.
  absl::StatusOr<uint32_t> Purge(const std::string& queue);

  // Fetches one message with basic.get (no consumer, manual ack); a
  // delivery_tag of 0 means the queue was empty.
  absl::StatusOr<Delivery> Get(const std::string& queue);

  bool healthy() const { return healthy_; }

 private:
  struct State;
  explicit AmqpConnection(std::unique_ptr<State> state);
  // Checks the last rpc reply; a broker's refusal carries the code
  // StatusCodeOfAmqpReply gives its reply code, and breaks the connection.
  absl::Status Check(const char* what);
  absl::Status Broken(absl::Status s);  // marks the connection unusable
  absl::Status DeclareExchange(const std::string& exchange);
  // How DeclareAside declares: only looks (passive), a durable queue, or
  // an exclusive, transient one of this connection.
  enum class Declare { kPassive, kDurable, kExclusive };
  // queue.declare on the inspect channel: a refusal closes only that channel
  // (opened again by the next call), never the connection, and its reply
  // code goes to `*refused` when given. NOT_FOUND for a passive one that
  // finds no queue.
  absl::StatusOr<QueueState> DeclareAside(const std::string& queue, Declare how,
                                          const amqp_table_t_& arguments, const char* what,
                                          int* refused = nullptr);
  absl::Status OpenInspectChannel();
  // The broker closed the inspect channel with `why`: acknowledged, so the
  // next call opens it again; `why` unless the acknowledgement fails.
  absl::Status InspectChannelClosed(absl::Status why);
  absl::Status DeclareShards(const Topology& topology);

  std::unique_ptr<State> state_;
  bool healthy_ = true;
  uint64_t next_publish_tag_ = 1;
  bool confirms_ = false;
  bool persistent_ = true;
  std::string exchange_;
  bool inspect_channel_open_ = false;
  std::set<std::string> locks_;  // the queues whose lock (Lock) this connection holds
};

}  // namespace outbox
