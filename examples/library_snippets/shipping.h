#pragma once

// The consumer's schema and its one step: what a new order changes, inside
// the transaction the library opens for it. The library looks each message
// up in the inbox and records it there, and answers in the format the
// producer reads. In a header of its own so that the consumer (consumer.cc)
// and its test (shipping_test.cc) share it.
#include <string>

#include "shared/sqlite/inbox.h"
#include "shared/sqlite/sqlite_message_handler.h"

namespace shop {

inline const outbox::DbSchema& ShippingSchema() {  // shipments and the inbox
  static const outbox::DbSchema schema = outbox::ConsumerSchema(
      "CREATE TABLE shipments (shipment_id TEXT PRIMARY KEY, order_id TEXT NOT NULL UNIQUE)");
  return schema;
}

// A new OrderPlaced only (its body is the order id): its shipment. An error
// here dead-letters the message, and nothing of it is written.
inline absl::StatusOr<std::string> ShipOrder(SQLite::Database& tx, const outbox::Delivery& order) {
  SQLite::Statement insert(tx, "INSERT INTO shipments VALUES ('ship-' || ?1, ?1)");
  insert.bind(1, order.body);
  insert.exec();
  return "ship-" + order.body;
}

}  // namespace shop
