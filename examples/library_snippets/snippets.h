#pragma once

// What the three snippets of docs/library.md share: where things are, and
// the shop's outbox, configured once for each process.
#include <string>

#include "shared/roles/config.h"

namespace shop {

struct Setup {
  outbox::AmqpUrl amqp;
  std::string shop_db;      // the producer's file (orders + outbox)
  std::string shipping_db;  // the consumer's file (shipments + inbox)
  outbox::Signing signing;  // the process's keys, for each of its roles
};

const outbox::DbSchema& ShopSchema();

// Every role of a process derives its options from this one block.
inline outbox::Config ShopOutbox(const Setup& setup) {
  outbox::Config config;
  config.amqp = setup.amqp;
  config.signing = setup.signing;
  config.queue = "shop.orders";  // shipping's replies come back on "shop.orders.replies"
  config.retry.base_delay = absl::Seconds(2);  // stamped on each row, applied by recovery
  config.retry.max_attempts = 5;
  config.db = setup.shop_db;  // the producer's file, which recovery reads too
  config.schema = &ShopSchema();
  return config;
}

absl::Status PlaceOrders(const Setup& setup, int orders);
absl::Status ShipOrders(const Setup& setup, int orders);
absl::Status RunRecovery(const Setup& setup, absl::Duration how_long);

}  // namespace shop
