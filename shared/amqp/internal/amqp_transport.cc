#include "shared/amqp/internal/amqp_transport.h"

#include <utility>

namespace outbox {

AmqpPublisher::AmqpPublisher(AmqpUrl url, Topology topology, std::string name, const Clock& clock)
    : AmqpLink(AmqpDialer(
          std::move(url), std::move(topology), std::move(name),
          [](AmqpConnection& c) { return c.EnableConfirms(); }, clock)) {}

absl::StatusOr<uint64_t> AmqpPublisher::Publish(const OutgoingMessage& message) {
  return Use([&](AmqpConnection& c) { return c.Publish(message); });
}

absl::Status AmqpPublisher::ReadConfirms(absl::Duration wait, std::vector<Confirm>* settled) {
  return Use([&](AmqpConnection& c) { return c.ReadConfirms(wait, settled); });
}

absl::StatusOr<QueueState> AmqpPublisher::Inspect(const std::string& queue) {
  return Use([&](AmqpConnection& c) { return c.Inspect(queue); });
}

AmqpConsumer::AmqpConsumer(AmqpUrl url, Topology topology, std::string name, std::string queue,
                           int prefetch, const Clock& clock)
    : AmqpLink(AmqpDialer(
          std::move(url), std::move(topology), std::move(name),
          [queue = std::move(queue), prefetch](AmqpConnection& c) {
            return c.Consume(queue, prefetch);
          },
          clock)) {}

absl::StatusOr<std::vector<Delivery>> AmqpConsumer::Next(size_t max, absl::Duration wait) {
  return Use([&](AmqpConnection& c) { return c.NextDeliveries(max, wait); });
}

absl::Status AmqpConsumer::Ack(uint64_t delivery_tag, bool multiple) {
  return Use([&](AmqpConnection& c) { return c.Ack(delivery_tag, multiple); });
}

absl::Status AmqpConsumer::Reject(uint64_t delivery_tag) {
  return Use([&](AmqpConnection& c) { return c.Reject(delivery_tag); });
}

absl::Status AmqpConsumer::Requeue(uint64_t delivery_tag, bool multiple) {
  return Use([&](AmqpConnection& c) { return c.Requeue(delivery_tag, multiple); });
}

AmqpQueueBrowser::AmqpQueueBrowser(AmqpUrl url, std::string name, const Clock& clock)
    : AmqpLink(AmqpDialer(
          std::move(url), Topology{}, std::move(name),
          [](AmqpConnection& c) { return c.EnableConfirms(); }, clock)) {}

absl::StatusOr<QueueState> AmqpQueueBrowser::Inspect(const std::string& queue) {
  return Use([&](AmqpConnection& c) { return c.Inspect(queue); });
}

absl::StatusOr<Delivery> AmqpQueueBrowser::Take(const std::string& queue) {
  return Use([&](AmqpConnection& c) { return c.Get(queue); });
}

absl::Status AmqpQueueBrowser::Ack(uint64_t delivery_tag) {
  return Use([&](AmqpConnection& c) { return c.Ack(delivery_tag, /*multiple=*/false); });
}

absl::Status AmqpQueueBrowser::Requeue(uint64_t delivery_tag, bool multiple) {
  return Use([&](AmqpConnection& c) { return c.Requeue(delivery_tag, multiple); });
}

absl::StatusOr<bool> AmqpQueueBrowser::PublishConfirmed(const std::string& exchange,
                                                        const OutgoingMessage& message,
                                                        absl::Duration timeout) {
  return Use([&](AmqpConnection& c) -> absl::StatusOr<bool> {
    c.PublishThrough(exchange);
    auto confirmed = c.PublishConfirmed({message}, timeout);
    if (!confirmed.ok()) return confirmed.status();
    return (*confirmed)[0];
  });
}

absl::StatusOr<bool> AmqpQueueBrowser::TryLock(const std::string& queue) {
  return Use([&](AmqpConnection& c) { return c.Lock(queue); });
}

absl::Status AmqpQueueBrowser::Unlock(const std::string& queue) {
  return Use([&](AmqpConnection& c) { return c.Unlock(queue); });
}

}  // namespace outbox
