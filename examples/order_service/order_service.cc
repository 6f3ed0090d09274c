#include "order_service.h"

#include <utility>

#include "shared/base/status_macros.h"

namespace order {

absl::StatusOr<std::unique_ptr<OrderService>> OrderService::Start(OrderStore& store,
                                                                  OrderServiceOptions options) {
  outbox::Producer::Options producer;
  producer.amqp = std::move(options.amqp);
  producer.queue = std::move(options.orders_queue);
  producer.reply_queue = std::move(options.reply_queue);
  producer.signing = std::move(options.signing);
  producer.name = "order";  // connections "order-relay" and "order-acks"
  OUTBOX_ASSIGN_OR_RETURN(auto started, outbox::Producer::Start(store.file(), producer));
  return std::unique_ptr<OrderService>(new OrderService(store, std::move(started)));
}

absl::StatusOr<std::string> OrderService::Place(const Order& order) {
  OUTBOX_RETURN_IF_ERROR(OrderStore::Check(order));
  return producer_->Write(OrderStore::OrderPlaced(order), store_.InsertOrder(order));
}

void OrderService::PlaceAsync(const Order& order, PlaceDone done) {
  if (absl::Status bad = OrderStore::Check(order); !bad.ok()) {
    std::move(done)(bad);
    return;
  }
  producer_->WriteAsync(
      OrderStore::OrderPlaced(order), store_.InsertOrder(order),
      [done = std::move(done)](absl::StatusOr<outbox::OutboxMessage> row) mutable {
        if (!row.ok()) return std::move(done)(row.status());
        std::move(done)(std::move(row->message_id));
      });
}

absl::StatusOr<outbox::OutboxStatus> OrderService::MessageStatus(const std::string& message_id) {
  OUTBOX_ASSIGN_OR_RETURN(outbox::OutboxMessage row, producer_->Get(message_id));
  return row.status;
}

}  // namespace order
