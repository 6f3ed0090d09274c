#include "shared/amqp/amqp_transport.h"

#include <utility>

namespace outbox {
namespace {
absl::Status NotConnected() { return absl::UnavailableError("amqp: not connected"); }
}  // namespace

AmqpPublisher::AmqpPublisher(AmqpUrl url, Topology topology, std::string name, const Clock& clock)
    : session_(std::move(url), std::move(topology), std::move(name),
               [](AmqpConnection& c) { return c.EnableConfirms(); }, clock) {}

absl::Status AmqpPublisher::Connect() {
  auto conn = session_.Get();
  conn_ = conn.ok() ? *conn : nullptr;
  return conn.status();
}

absl::Status AmqpPublisher::Poll(absl::Duration wait) {
  return session_.connected() ? conn_->Poll(wait) : NotConnected();
}

absl::StatusOr<uint64_t> AmqpPublisher::Publish(const OutgoingMessage& message) {
  if (!session_.connected()) return NotConnected();
  return conn_->Publish(message);
}

absl::Status AmqpPublisher::ReadConfirms(absl::Duration wait, std::vector<Confirm>* settled) {
  return session_.connected() ? conn_->ReadConfirms(wait, settled) : NotConnected();
}

AmqpConsumer::AmqpConsumer(AmqpUrl url, Topology topology, std::string name, std::string queue,
                           int prefetch, const Clock& clock)
    : session_(std::move(url), std::move(topology), std::move(name),
               [queue = std::move(queue), prefetch](AmqpConnection& c) {
                 return c.Consume(queue, prefetch);
               },
               clock) {}

absl::Status AmqpConsumer::Connect() {
  auto conn = session_.Get();
  conn_ = conn.ok() ? *conn : nullptr;
  return conn.status();
}

absl::Status AmqpConsumer::Poll(absl::Duration wait) {
  return session_.connected() ? conn_->Poll(wait) : NotConnected();
}

absl::StatusOr<std::vector<Delivery>> AmqpConsumer::Next(size_t max, absl::Duration wait) {
  if (!session_.connected()) return NotConnected();
  return conn_->NextDeliveries(max, wait);
}

absl::Status AmqpConsumer::Ack(uint64_t delivery_tag, bool multiple) {
  return session_.connected() ? conn_->Ack(delivery_tag, multiple) : NotConnected();
}

absl::Status AmqpConsumer::Reject(uint64_t delivery_tag) {
  return session_.connected() ? conn_->Reject(delivery_tag) : NotConnected();
}

absl::Status AmqpConsumer::Requeue(uint64_t delivery_tag, bool multiple) {
  return session_.connected() ? conn_->Requeue(delivery_tag, multiple) : NotConnected();
}

}  // namespace outbox
