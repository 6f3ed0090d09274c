#pragma once

// Orders on a SQLite file. Each order and its OrderPlaced outbox row are
// written in one transaction; the outbox repository the relay and the ack
// listener update is the library's SqliteOutbox on the same file (the one
// the library's contract suite holds to the seam).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shared/base/clock.h"
#include "shared/outbox/repository.h"
#include "shared/sqlite/sqlite_file.h"
#include "shared/sqlite/sqlite_outbox.h"

namespace order {

struct Order {
  std::string order_id;
  std::string customer;
  int64_t amount_minor = 0;
};

struct OrderQueues {
  std::string orders;   // where OrderPlaced goes
  std::string replies;  // where its consumer acknowledges it (the body: the message id)
};

// The OrderPlaced body: "order_id=o-1 customer=alice amount_minor=1250".
std::string OrderPlacedBody(const Order& order);

class OrderStore {
 public:
  static absl::StatusOr<std::unique_ptr<OrderStore>> Open(const std::string& path,
                                                          OrderQueues queues,
                                                          const outbox::Clock& clock);

  // Commits the order and its OrderPlaced row; returns the message for the
  // relay. INVALID_ARGUMENT for a bad order, ALREADY_EXISTS for a known id.
  absl::StatusOr<outbox::OutgoingMessage> Place(const Order& order, const std::string& message_id);
  // The outbox row's status; NOT_FOUND for an unknown message.
  absl::StatusOr<outbox::OutboxStatus> MessageStatus(const std::string& message_id);

  // What the relay and the ack listener update.
  outbox::OutboxRepository& outbox() { return outbox_; }

 private:
  OrderStore(std::unique_ptr<outbox::SqliteFile> file, OrderQueues queues,
             const outbox::Clock& clock)
      : file_(std::move(file)), queues_(std::move(queues)), clock_(clock), outbox_(*file_, clock) {}

  std::unique_ptr<outbox::SqliteFile> file_;
  const OrderQueues queues_;
  const outbox::Clock& clock_;
  outbox::SqliteOutbox outbox_;
};

}  // namespace order
