#pragma once

// Orders on a SQLite file. Each order and its OrderPlaced outbox row are
// written in one transaction; the store is also the outbox repository the
// relay and the ack listener update, through the library's SQLite adapters.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shared/base/clock.h"
#include "shared/outbox/repository.h"
#include "shared/sqlite/sqlite_file.h"

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

class OrderStore final : public outbox::OutboxRepository {
 public:
  static absl::StatusOr<std::unique_ptr<OrderStore>> Open(const std::string& path,
                                                          OrderQueues queues,
                                                          const outbox::Clock& clock);

  // Commits the order and its OrderPlaced row; returns the message for the
  // relay. INVALID_ARGUMENT for a bad order, ALREADY_EXISTS for a known id.
  absl::StatusOr<outbox::OutgoingMessage> Place(const Order& order, const std::string& message_id);
  // The outbox row's status; NOT_FOUND for an unknown message.
  absl::StatusOr<outbox::OutboxStatus> MessageStatus(const std::string& message_id);

  absl::StatusOr<outbox::AckTally> RecordAcks(const std::vector<std::string>& message_ids) override;
  absl::Status RecordPublishFailure(const std::vector<std::string>& message_ids,
                                    const std::string& error) override;
  absl::StatusOr<std::vector<std::string>> TakenOver(
      const std::vector<std::string>& message_ids) override;

 private:
  OrderStore(std::unique_ptr<outbox::SqliteFile> file, OrderQueues queues,
             const outbox::Clock& clock)
      : file_(std::move(file)), queues_(std::move(queues)), clock_(clock) {}

  // Every statement runs on the writer connection: the relay, the ack
  // listener and Place take turns on its mutex.
  std::unique_ptr<outbox::SqliteFile> file_;
  const OrderQueues queues_;
  const outbox::Clock& clock_;
  const outbox::RetryPolicy retry_;
};

}  // namespace order
