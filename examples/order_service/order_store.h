#pragma once

// Orders on a SQLite file. The file holds the orders table and the outbox
// tables (one schema); placing an order is the producer's business write:
// the order's row, written in the producer's transaction with its
// OrderPlaced outbox row (order_service.h).
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/base/clock.h"
#include "shared/outbox/internal/state_machine.h"
#include "shared/sqlite/internal/group_writer.h"
#include "shared/sqlite/schema.h"
#include "shared/sqlite/sqlite_file.h"

namespace order {

struct Order {
  std::string order_id;
  std::string customer;
  int64_t amount_minor = 0;
};

// The OrderPlaced body: "order_id=o-1 customer=alice amount_minor=1250".
std::string OrderPlacedBody(const Order& order);

// Migration 1: the orders table and the outbox tables (CreateOutboxTable).
const outbox::DbSchema& OrderDbSchema();

class OrderStore {
 public:
  static absl::StatusOr<std::unique_ptr<OrderStore>> Open(const std::string& path,
                                                          const outbox::Clock& clock);

  // INVALID_ARGUMENT naming the field of a bad order.
  static absl::Status Check(const Order& order);
  // The OrderPlaced message of `order`; its message id (a new time-ordered
  // UUID), topic and reply_to are left to the producer.
  static outbox::MessageSpec OrderPlaced(const Order& order);
  // The business write of `order` (a copy is kept): its row in orders, or
  // ALREADY_EXISTS for a known order id. It runs in the producer's group
  // transaction, on the writer's thread (BusinessWrite's contract).
  outbox::BusinessWrite InsertOrder(Order order) const;

  // The file the producer writes: this store's and the outbox's.
  outbox::SqliteFile& file() { return *file_; }

 private:
  OrderStore(std::unique_ptr<outbox::SqliteFile> file, const outbox::Clock& clock)
      : file_(std::move(file)), clock_(clock) {}

  std::unique_ptr<outbox::SqliteFile> file_;
  const outbox::Clock& clock_;
};

}  // namespace order
