#pragma once

// The order service's outbox workers: each committed OrderPlaced row is
// relayed to the orders queue at once (the library's Relay over its AMQP
// publisher), and each reply on the reply queue closes its row (AckListener).
#include <string>

#include "order_store.h"
#include "shared/amqp/amqp_transport.h"
#include "shared/base/ids.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/ack_listener.h"
#include "shared/outbox/relay.h"

namespace order {

class OrderService {
 public:
  OrderService(OrderStore& store, const outbox::AmqpUrl& amqp, const OrderQueues& queues);

  void Start();
  void Stop();  // publishes what is committed if the broker is there

  // Commits the order with its OrderPlaced row, then hands the row to the
  // relay. Returns the message id.
  absl::StatusOr<std::string> Place(const Order& order);

 private:
  OrderStore& store_;
  outbox::UuidGenerator ids_;
  outbox::MetricsRegistry metrics_;
  outbox::AmqpPublisher publisher_;
  outbox::AmqpConsumer replies_;
  outbox::Relay relay_;
  outbox::AckListener acks_;
};

}  // namespace order
