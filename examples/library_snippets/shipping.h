#pragma once

// The consumer's handler and schema: what one new order changes, inside the
// transaction the library opens for it. The library looks each message up in
// the inbox and records it there, and answers in the format the producer
// reads. In a header of its own so that the consumer (consumer.cc) and its
// test (shipping_test.cc) share it.
#include <string>

#include "shared/sqlite/inbox.h"
#include "shared/sqlite/sqlite_message_handler.h"

namespace shop {

struct OrderPlaced {
  std::string message_id;
  std::string order_id;
};

class Shipping final : public outbox::SqliteMessageHandler<OrderPlaced> {
 public:
  using SqliteMessageHandler::SqliteMessageHandler;

  absl::StatusOr<OrderPlaced> Decode(const outbox::Delivery& d) override {
    if (d.type != "OrderPlaced" || d.body.empty()) {
      return absl::InvalidArgumentError("not an OrderPlaced");  // dead-lettered
    }
    return OrderPlaced{d.message_id, d.body};
  }
  std::string BusinessKey(const OrderPlaced& m) override { return m.order_id; }

  // A new order only, inside the batch's transaction: its shipment.
  absl::StatusOr<std::string> Apply(SQLite::Database& tx, const OrderPlaced& m) override {
    const std::string shipment = "ship-" + m.order_id;
    SQLite::Statement insert(tx, "INSERT INTO shipments VALUES (?, ?)");
    insert.bind(1, shipment);
    insert.bind(2, m.order_id);
    insert.exec();
    return shipment;
  }
};

inline const outbox::DbSchema& ShippingSchema() {
  static const outbox::DbSchema schema{{{"shipments and the inbox", [](SQLite::Database& db) {
                                           db.exec(
                                               "CREATE TABLE shipments (shipment_id TEXT PRIMARY "
                                               "KEY, order_id TEXT NOT NULL UNIQUE)");
                                           outbox::CreateInboxTable(db);
                                         }}}};
  return schema;
}

}  // namespace shop
