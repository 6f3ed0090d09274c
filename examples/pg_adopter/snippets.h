#pragma once

// What the PostgreSQL snippets of docs/library.md share: the shop's outbox,
// configured once for each process, and the shop's own tables.
#include <string>

#include "shared/postgres/pg_schema.h"
#include "shared/roles/config.h"

namespace shop {

// Every role of a process derives its options from this one block.
inline outbox::Config ShopOutbox(const outbox::AmqpUrl& amqp, const outbox::Signing& signing,
                                 const std::string& shop_db) {
  outbox::Config config;
  config.amqp = amqp;
  config.signing = signing;       // the process's keys, for each of its roles
  config.queue = "shop.orders";   // shipping's replies come back on "shop.orders.replies"
  config.retry.max_attempts = 5;  // stamped on each row, applied by recovery
  config.db = shop_db;  // the producer's database, a postgresql:// URI; recovery reads it too
  return config;
}

// The shop's tables, a schema of their own beside the library's (its name
// is yours: "outbox" is the library's). migrations[i] makes version i + 1,
// each a PgMigration{what, apply} run in one transaction.
inline const outbox::PgSchema& ShopSchema() {
  static const outbox::PgSchema schema{
      "shop",
      {{"orders", [](outbox::PgConnection& conn) {
          return conn.Exec(
              "CREATE TABLE orders (order_id TEXT PRIMARY KEY, amount_minor BIGINT NOT NULL)");
        }}}};
  return schema;
}

absl::Status PlaceOrders(const outbox::Config& shop, int orders);
absl::Status ShipOrders(const outbox::Config& shop, const std::string& shipping_db, int orders);
absl::Status RunRecovery(const outbox::Config& shop, absl::Duration how_long);

}  // namespace shop
