#pragma once

// The AMQP adapters of the broker seam (shared/outbox/transport.h): one
// AmqpSession each, so a lost connection is re-established with backoff and
// the topology declared again.
#include <string>

#include "shared/amqp/amqp_session.h"
#include "shared/outbox/transport.h"

namespace outbox {

class AmqpPublisher final : public MessagePublisher {
 public:
  // `name` shows in the broker's connection list.
  AmqpPublisher(AmqpUrl url, Topology topology, std::string name,
                const Clock& clock = SystemClock::Get());

  absl::Status Connect() override;
  bool connected() const override { return session_.connected(); }
  void Reset(const absl::Status& why) override { session_.Reset(why); }
  absl::Status Poll(absl::Duration wait) override;
  absl::StatusOr<uint64_t> Publish(const OutgoingMessage& message) override;
  absl::Status ReadConfirms(absl::Duration wait, std::vector<Confirm>* settled) override;

 private:
  AmqpSession session_;
  AmqpConnection* conn_ = nullptr;  // valid while session_.connected()
};

class AmqpConsumer final : public MessageConsumer {
 public:
  AmqpConsumer(AmqpUrl url, Topology topology, std::string name, std::string queue, int prefetch,
               const Clock& clock = SystemClock::Get());

  absl::Status Connect() override;
  bool connected() const override { return session_.connected(); }
  void Reset(const absl::Status& why) override { session_.Reset(why); }
  absl::Status Poll(absl::Duration wait) override;
  absl::StatusOr<std::vector<Delivery>> Next(size_t max, absl::Duration wait) override;
  absl::Status Ack(uint64_t delivery_tag, bool multiple) override;
  absl::Status Reject(uint64_t delivery_tag) override;
  absl::Status Requeue(uint64_t delivery_tag, bool multiple) override;

 private:
  AmqpSession session_;
  AmqpConnection* conn_ = nullptr;
};

}  // namespace outbox
