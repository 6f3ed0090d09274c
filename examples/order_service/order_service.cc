#include "order_service.h"

#include "shared/base/status_macros.h"

namespace order {
namespace {

// A reply's body is the id of the message it acknowledges.
absl::StatusOr<std::vector<outbox::Acknowledgement>> DecodeReply(const outbox::Delivery& reply) {
  if (reply.body.empty()) return absl::InvalidArgumentError("reply: empty body");
  outbox::Acknowledgement ack;
  ack.message_id = reply.body;
  return std::vector<outbox::Acknowledgement>{ack};
}

}  // namespace

OrderService::OrderService(OrderStore& store, const outbox::AmqpUrl& amqp,
                           const OrderQueues& queues)
    : store_(store),
      publisher_(amqp, outbox::Topology{{queues.orders}}, "order-relay"),
      replies_(amqp, outbox::Topology{{queues.replies}}, "order-ack-listener", queues.replies,
               /*prefetch=*/64),
      relay_(publisher_, store.outbox(), outbox::SystemClock::Get(), metrics_,
             outbox::RelayOptions{}),
      acks_(replies_, store.outbox(), DecodeReply, metrics_,
            outbox::AckListenerOptions{queues.replies, 64}) {}

void OrderService::Start() {
  relay_.Start();
  acks_.Start();
}

void OrderService::Stop() {
  acks_.Stop();
  relay_.Stop();
}

absl::StatusOr<std::string> OrderService::Place(const Order& order) {
  const std::string message_id = ids_.NewId();
  OUTBOX_ASSIGN_OR_RETURN(outbox::OutgoingMessage message, store_.Place(order, message_id));
  relay_.Enqueue({std::move(message)});
  return message_id;
}

}  // namespace order
