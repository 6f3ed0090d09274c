// Runs the PostgreSQL snippets of docs/library.md against a server and a
// broker:
//   pg_adopter SHOP_DB SHIPPING_DB AMQP_URL KEYS_FILE
// (SHOP_DB and SHIPPING_DB two postgresql:// URIs, their passwords in
// PGPASSFILE or the URIs' passfile). Shipping books each order once in its
// own database, every outbox row ends SENT, recovery opens the shop's
// database and runs; every message signed with the keys of KEYS_FILE
// ("<key id> <secret>" lines). Exit status 0 when all of that holds.
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "shared/postgres/pg_connection.h"
#include "snippets.h"

namespace {

// The first column of the query's one row, -1 when it cannot be read.
int64_t Count(const std::string& db, const std::string& sql) {
  auto conn = outbox::PgConnection::Open(db);
  if (!conn.ok()) return -1;
  auto r = (*conn)->Query(sql);
  int64_t n = -1;
  if (!r.ok() || r->rows() != 1 || !absl::SimpleAtoi(r->Get(0, 0), &n)) return -1;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: pg_adopter SHOP_DB SHIPPING_DB AMQP_URL KEYS_FILE\n");
    return 2;
  }
  const std::string shop_db = argv[1];
  const std::string shipping_db = argv[2];
  auto url = outbox::AmqpUrl::Parse(argv[3]);
  auto signing = outbox::Signing::FromKeyFile(argv[4]);  // once for the process
  for (const absl::Status& s : {url.status(), signing.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 2;
    }
  }
  const outbox::Config shop = shop::ShopOutbox(*url, *signing, shop_db);
  constexpr int kOrders = 20;
  absl::Status shipped;
  std::thread shipping([&] { shipped = shop::ShipOrders(shop, shipping_db, kOrders); });
  absl::Status placed = shop::PlaceOrders(shop, kOrders);
  shipping.join();
  absl::Status recovered = shop::RunRecovery(shop, absl::Seconds(1));
  for (const absl::Status& s : {placed, shipped, recovered}) {
    if (!s.ok()) {
      std::fprintf(stderr, "FAIL: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  const int64_t orders = Count(shop_db, "SELECT count(*) FROM orders");
  const int64_t sent = Count(shop_db, "SELECT count(*) FROM outbox WHERE status = 'SENT'");
  const int64_t rows = Count(shop_db, "SELECT count(*) FROM outbox");
  const int64_t shipments = Count(shipping_db, "SELECT count(*) FROM shipments");
  const int64_t inbox = Count(shipping_db, "SELECT count(*) FROM inbox");
  std::printf("orders %ld, outbox rows %ld (SENT %ld), shipments %ld, inbox rows %ld\n",
              static_cast<long>(orders), static_cast<long>(rows), static_cast<long>(sent),
              static_cast<long>(shipments), static_cast<long>(inbox));
  return orders == kOrders && rows == kOrders && sent == kOrders && shipments == kOrders &&
                 inbox == kOrders
             ? 0
             : 1;
}
