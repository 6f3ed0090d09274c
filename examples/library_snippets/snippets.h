#pragma once

// What the three snippets of docs/library.md share: the shop's outbox,
// configured once for each process.
#include <string>

#include "shared/roles/config.h"
#include "shared/sqlite/outbox_table.h"

namespace shop {

// Every role of a process derives its options from this one block.
inline outbox::Config ShopOutbox(const outbox::AmqpUrl& amqp, const outbox::Signing& signing,
                                 const std::string& shop_db) {
  static const outbox::DbSchema schema = outbox::ProducerSchema(  // orders and the outbox
      "CREATE TABLE orders (order_id TEXT PRIMARY KEY, amount_minor INTEGER NOT NULL)");
  outbox::Config config;
  config.amqp = amqp;
  config.signing = signing;       // the process's keys, for each of its roles
  config.queue = "shop.orders";   // shipping's replies come back on "shop.orders.replies"
  config.retry.max_attempts = 5;  // stamped on each row, applied by recovery
  config.db = shop_db;            // the producer's file, which recovery reads too
  config.schema = &schema;
  return config;
}

absl::Status PlaceOrders(const outbox::Config& shop, int orders);
absl::Status ShipOrders(const outbox::Config& shop, const std::string& shipping_db, int orders);
absl::Status RunRecovery(const outbox::Config& shop, absl::Duration how_long);

}  // namespace shop
