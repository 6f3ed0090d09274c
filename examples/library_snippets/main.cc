// Runs the three snippets of docs/library.md against a broker:
//   library_snippets AMQP_URL DIR KEYS_FILE
// shipping books each order once, every outbox row ends SENT, recovery opens
// the shop's file and runs, and the library's consistency check holds (no
// GoogleTest: outbox::roles alone); every message signed with the keys of
// KEYS_FILE ("<key id> <secret>" lines). Exit status 0 when all of that holds.
#include <SQLiteCpp/SQLiteCpp.h>

#include <cstdio>
#include <thread>

#include "shared/sqlite/consistency.h"
#include "snippets.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: library_snippets AMQP_URL DIR KEYS_FILE\n");
    return 2;
  }
  auto url = outbox::AmqpUrl::Parse(argv[1]);
  auto signing = outbox::Signing::FromKeyFile(argv[3]);  // once for the process
  for (const absl::Status& s : {url.status(), signing.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 2;
    }
  }
  const std::string shop_db = std::string(argv[2]) + "/shop.db";
  const std::string shipping_db = std::string(argv[2]) + "/shipping.db";
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
  // The library's consistency check, as a production checker runs it: no
  // row left SENDING, each SENT row applied, and the shop's own invariant.
  auto report = outbox::CheckConsistency(
      shop_db, shipping_db,
      {{{"order without its shipment",
         "SELECT count(*) FROM orders o WHERE NOT EXISTS "
         "(SELECT 1 FROM consumer.shipments s WHERE s.order_id = o.order_id)"}}});
  if (!report.ok()) {
    std::fprintf(stderr, "FAIL: %s\n", report.status().ToString().c_str());
    return 1;
  }
  SQLite::Database shipments_db(shipping_db, SQLite::OPEN_READONLY);
  const int shipments = shipments_db.execAndGet("SELECT count(*) FROM shipments").getInt();
  std::printf("orders %d, outbox rows SENT %ld, shipments %d, inbox rows %ld: %s\n", kOrders,
              static_cast<long>(report->sent), shipments, static_cast<long>(report->inbox),
              report->ToString().c_str());
  return report->ok && report->sent == kOrders && shipments == kOrders && report->inbox == kOrders
             ? 0
             : 1;
}
