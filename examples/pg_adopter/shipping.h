#pragma once

// The consumer's schema and its one step on PostgreSQL: what a new order
// changes, inside the transaction the library opens for it on the
// consumer's own database. The library looks each message up in the inbox
// and records it there, and answers in the format the producer reads.
#include <string>

#include "shared/base/status_macros.h"
#include "shared/postgres/pg_message_handler.h"
#include "shared/postgres/pg_schema.h"

namespace shop {

inline const outbox::PgSchema& ShippingSchema() {  // shipments and the inbox
  static const outbox::PgSchema schema = outbox::PgConsumerSchema(
      "shipping",
      "CREATE TABLE shipments (shipment_id TEXT PRIMARY KEY, order_id TEXT NOT NULL UNIQUE)");
  return schema;
}

// A new OrderPlaced only (its body is the order id): its shipment. An error
// here dead-letters the message and nothing of it is written; a lost
// connection (UNAVAILABLE) holds the batch to be applied again.
inline absl::StatusOr<std::string> ShipOrder(outbox::PgConnection& tx,
                                             const outbox::Delivery& order) {
  const std::string shipment_id = "ship-" + order.body;
  OUTBOX_RETURN_IF_ERROR(
      tx.Query("INSERT INTO shipments VALUES ($1, $2)", {shipment_id, order.body}).status());
  return shipment_id;
}

}  // namespace shop
