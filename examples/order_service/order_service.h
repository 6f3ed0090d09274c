#pragma once

// The order service: a producer on the library's role (outbox::Producer,
// docs/library.md#the-producer). Place commits the order (OrderStore's
// business write) with its OrderPlaced outbox row in the producer's group
// transaction, shared with the orders placed by other threads at the same
// time; the producer's relay publishes the message right after the commit,
// and its ack listener closes the row (SENT) when the consumer's reply
// comes back.
#include <memory>
#include <string>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "order_store.h"
#include "shared/amqp/amqp_url.h"
#include "shared/outbox/message.h"
#include "shared/outbox/signing.h"
#include "shared/roles/producer.h"

namespace order {

struct OrderServiceOptions {
  outbox::AmqpUrl amqp;
  std::string orders_queue;  // where OrderPlaced goes
  std::string reply_queue;   // where its consumer answers; "": "<orders_queue>.replies"
  outbox::Signing signing;   // the keys the consumer checks with, or Signing::Unsigned()
};

class OrderService {
 public:
  // Starts the producer on the store's file (which outlives the service).
  static absl::StatusOr<std::unique_ptr<OrderService>> Start(OrderStore& store,
                                                             OrderServiceOptions options);

  // Commits the order with its OrderPlaced row and returns the message id;
  // the message is published right after the commit. INVALID_ARGUMENT for
  // a bad order, ALREADY_EXISTS for a known order id (nothing written).
  // Any thread may call it; callers at the same time share one commit.
  absl::StatusOr<std::string> Place(const Order& order);
  // The same without waiting: `done` runs once with the message id or the
  // error, on the producer's writer thread right after the commit (keep it
  // short), or here at once for a bad order or a stopped service.
  using PlaceDone = absl::AnyInvocable<void(absl::StatusOr<std::string>) &&>;
  void PlaceAsync(const Order& order, PlaceDone done);

  // The OrderPlaced row's status; NOT_FOUND for an unknown message.
  absl::StatusOr<outbox::OutboxStatus> MessageStatus(const std::string& message_id);

  // Its relay, ack listener and group writer: counters, WaitUntilClosed.
  outbox::Producer& producer() { return *producer_; }
  // Publishes what is committed if the broker is there (Producer::Stop).
  void Stop() { producer_->Stop(); }

 private:
  OrderService(OrderStore& store, std::unique_ptr<outbox::Producer> producer)
      : store_(store), producer_(std::move(producer)) {}

  OrderStore& store_;
  std::unique_ptr<outbox::Producer> producer_;
};

}  // namespace order
