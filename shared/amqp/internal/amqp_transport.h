#pragma once

// The AMQP adapters of the broker seam (shared/outbox/transport.h): one
// AmqpDialer each, so a lost connection is re-established with backoff and
// the topology declared again.
#include <string>
#include <utility>
#include <vector>

#include "shared/amqp/internal/amqp_dialer.h"
#include "shared/outbox/transport.h"

namespace outbox {

// What both adapters share: the dialer, and operations only while connected.
template <typename Interface>
class AmqpLink : public Interface {
 public:
  absl::Status Connect() override {
    auto conn = dialer_.Get();
    conn_ = conn.ok() ? *conn : nullptr;
    return conn.status();
  }
  bool connected() const override { return dialer_.connected(); }
  bool up() const override { return dialer_.up(); }
  int64_t drops() const override { return dialer_.drops(); }
  void Reset(const absl::Status& why) override { dialer_.Reset(why); }
  absl::Status Poll(absl::Duration wait) override {
    return Use([&](AmqpConnection& c) { return c.Poll(wait); });
  }

 protected:
  explicit AmqpLink(AmqpDialer dialer) : dialer_(std::move(dialer)) {}
  // Runs `op` on the connection, or UNAVAILABLE when there is none.
  template <typename Op>
  auto Use(Op op) -> decltype(op(std::declval<AmqpConnection&>())) {
    if (!dialer_.connected()) return absl::UnavailableError("amqp: not connected");
    return op(*conn_);
  }

 private:
  AmqpDialer dialer_;
  AmqpConnection* conn_ = nullptr;  // valid while dialer_.connected()
};

class AmqpPublisher final : public AmqpLink<MessagePublisher> {
 public:
  // `name` shows in the broker's connection list.
  AmqpPublisher(AmqpUrl url, Topology topology, std::string name,
                const Clock& clock = SystemClock::Get());

  absl::StatusOr<uint64_t> Publish(const OutgoingMessage& message) override;
  absl::Status ReadConfirms(absl::Duration wait, std::vector<Confirm>* settled) override;
  absl::StatusOr<QueueState> Inspect(const std::string& queue) override;
};

class AmqpConsumer final : public AmqpLink<MessageConsumer> {
 public:
  AmqpConsumer(AmqpUrl url, Topology topology, std::string name, std::string queue, int prefetch,
               const Clock& clock = SystemClock::Get());

  absl::StatusOr<std::vector<Delivery>> Next(size_t max, absl::Duration wait) override;
  absl::Status Ack(uint64_t delivery_tag, bool multiple) override;
  absl::Status Reject(uint64_t delivery_tag) override;
  absl::Status Requeue(uint64_t delivery_tag, bool multiple) override;
};

// Declares nothing but its locks (TryLock: exclusive queues of its own
// connection, which recovery's broker user may declare) and publishes with
// confirms.
class AmqpQueueBrowser final : public AmqpLink<QueueBrowser> {
 public:
  AmqpQueueBrowser(AmqpUrl url, std::string name, const Clock& clock = SystemClock::Get());

  absl::StatusOr<QueueState> Inspect(const std::string& queue) override;
  absl::StatusOr<Delivery> Take(const std::string& queue) override;
  absl::Status Ack(uint64_t delivery_tag) override;
  absl::Status Requeue(uint64_t delivery_tag, bool multiple) override;
  absl::StatusOr<bool> PublishConfirmed(const std::string& exchange, const OutgoingMessage& message,
                                        absl::Duration timeout) override;
  absl::StatusOr<bool> TryLock(const std::string& queue) override;
  absl::Status Unlock(const std::string& queue) override;
};

}  // namespace outbox
