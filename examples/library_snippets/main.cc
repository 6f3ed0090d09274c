// Runs the three snippets of docs/library.md against a broker:
//   library_snippets AMQP_URL DIR KEYS_FILE
// shipping books each order once, every outbox row ends SENT, and recovery
// opens the shop's file and runs; every message signed with the keys of
// KEYS_FILE ("<key id> <secret>" lines). Exit status 0 when all of that holds.
#include <SQLiteCpp/SQLiteCpp.h>

#include <cstdio>
#include <thread>

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
  const shop::Setup setup{*url, std::string(argv[2]) + "/shop.db",
                          std::string(argv[2]) + "/shipping.db", *signing};
  constexpr int kOrders = 20;
  absl::Status shipped;
  std::thread shipping([&] { shipped = shop::ShipOrders(setup, kOrders); });
  absl::Status placed = shop::PlaceOrders(setup, kOrders);
  shipping.join();
  absl::Status recovered = shop::RunRecovery(setup, absl::Seconds(1));
  for (const absl::Status& s : {placed, shipped, recovered}) {
    if (!s.ok()) {
      std::fprintf(stderr, "FAIL: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  SQLite::Database shop_db(setup.shop_db, SQLite::OPEN_READONLY);
  SQLite::Database shipping_db(setup.shipping_db, SQLite::OPEN_READONLY);
  const int sent = shop_db.execAndGet("SELECT count(*) FROM outbox WHERE status = 'SENT'").getInt();
  const int shipments = shipping_db.execAndGet("SELECT count(*) FROM shipments").getInt();
  const int inbox = shipping_db.execAndGet("SELECT count(*) FROM inbox").getInt();
  std::printf("orders %d, outbox rows SENT %d, shipments %d, inbox rows %d\n", kOrders, sent,
              shipments, inbox);
  return sent == kOrders && shipments == kOrders && inbox == kOrders ? 0 : 1;
}
