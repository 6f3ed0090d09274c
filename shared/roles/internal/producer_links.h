#pragma once

// What a producer role shares whatever its store (producer.h on SQLite,
// shared/postgres/pg_producer.h on PostgreSQL): the checks and defaults of
// the broker-facing part of Producer::Options, the relay's and the ack
// listener's options made from it, the two AMQP connections through the
// dialer, and recovery's default instance id.
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "shared/outbox/internal/ack_listener.h"
#include "shared/outbox/internal/relay.h"
#include "shared/outbox/transport.h"
#include "shared/roles/producer.h"

namespace outbox::internal {

// Checks what both producers read (signing, queue, reply_queue,
// reply_prefetch, retry) and fills reply_queue and decode_reply when empty;
// errors name `role` and the setting. Not the group commit: each store has its own.
absl::Status ValidateProducerLinks(Producer::Options& options, absl::string_view role);

RelayOptions RelayOptionsOf(const Producer::Options& options);
AckListenerOptions AckListenerOptionsOf(const Producer::Options& options);

// The relay's publisher ("<name>-relay", declaring the queue) and the ack
// listener's consumer of the reply queue ("<name>-acks"), both on
// connections of the AMQP dialer (reconnect with backoff).
struct ProducerLinks {
  std::unique_ptr<MessagePublisher> publisher;
  std::unique_ptr<MessageConsumer> replies;
};
ProducerLinks DialProducerLinks(const Producer::Options& options);

// A recovery lease holder's name when none is given: "<queue>-<host name>-<process id>".
std::string DefaultInstanceId(const std::string& queue);

}  // namespace outbox::internal
