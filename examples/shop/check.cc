// shop_check: the shop's consistency, read from both files (plain SQLite,
// read-only): every order has exactly one shipment, no shipment lacks its
// order, and no outbox row is left SENDING or FAILED. Prints the counts; exit
// status 0 only when all of that holds (and, with --expect_orders=N, there
// are N orders), 1 when it does not, 2 for a usage error.
#include <SQLiteCpp/SQLiteCpp.h>

#include <cstdio>
#include <string>

#include "shop.h"

namespace {

constexpr char kUsage[] = "shop_check --shop_db=PATH --shipping_db=PATH [--expect_orders=N]";

int64_t Count(SQLite::Database& db, const char* sql) {
  return db.execAndGet(sql).getInt64();
}

}  // namespace

int main(int argc, char** argv) {
  auto flags =
      shop::Flags::Parse(argc, argv, {{"shop_db", ""}, {"shipping_db", ""}, {"expect_orders", ""}});
  if (!flags.ok()) return shop::Usage(flags.status(), kUsage);
  auto shop_db = flags->Required("shop_db");
  auto shipping_db = flags->Required("shipping_db");
  for (const absl::Status& s : {shop_db.status(), shipping_db.status()}) {
    if (!s.ok()) return shop::Usage(s, kUsage);
  }
  int64_t expected = -1;
  if (!flags->Get("expect_orders").empty()) {
    auto n = flags->Int("expect_orders");
    if (!n.ok()) return shop::Usage(n.status(), kUsage);
    expected = *n;
  }
  try {
    SQLite::Database db(*shop_db, SQLite::OPEN_READONLY);
    db.setBusyTimeout(5000);
    SQLite::Statement attach(db, "ATTACH DATABASE ? AS ship");
    attach.bind(1, *shipping_db);
    attach.exec();
    SQLite::Transaction snapshot(db);  // one read snapshot of each file
    const int64_t orders = Count(db, "SELECT count(*) FROM orders");
    const int64_t shipments = Count(db, "SELECT count(*) FROM ship.shipments");
    const int64_t unshipped =
        Count(db,
              "SELECT count(*) FROM orders o WHERE NOT EXISTS "
              "(SELECT 1 FROM ship.shipments s WHERE s.order_id = o.order_id)");
    const int64_t orphans = Count(db,
                                  "SELECT count(*) FROM ship.shipments s WHERE NOT EXISTS "
                                  "(SELECT 1 FROM orders o WHERE o.order_id = s.order_id)");
    const int64_t doubled = Count(db,
                                  "SELECT count(*) FROM (SELECT order_id FROM ship.shipments "
                                  "GROUP BY order_id HAVING count(*) > 1)");
    const int64_t sending = Count(db, "SELECT count(*) FROM outbox WHERE status = 'SENDING'");
    const int64_t sent = Count(db, "SELECT count(*) FROM outbox WHERE status = 'SENT'");
    const int64_t failed = Count(db, "SELECT count(*) FROM outbox WHERE status = 'FAILED'");
    const int64_t archived = Count(db, "SELECT count(*) FROM outbox_archive");
    const int64_t inbox = Count(db, "SELECT count(*) FROM ship.inbox");
    const bool ok = unshipped == 0 && orphans == 0 && doubled == 0 && sending == 0 && failed == 0 &&
                    sent + archived == orders && shipments == orders &&
                    (expected < 0 || orders == expected);
    std::printf(
        "shop_check: %s orders=%ld shipments=%ld unshipped=%ld orphan_shipments=%ld "
        "doubled=%ld outbox_sending=%ld outbox_sent=%ld outbox_failed=%ld archived=%ld "
        "inbox=%ld%s\n",
        ok ? "OK" : "NOT YET", static_cast<long>(orders), static_cast<long>(shipments),
        static_cast<long>(unshipped), static_cast<long>(orphans), static_cast<long>(doubled),
        static_cast<long>(sending), static_cast<long>(sent), static_cast<long>(failed),
        static_cast<long>(archived), static_cast<long>(inbox),
        expected < 0 ? "" : (" expected_orders=" + std::to_string(expected)).c_str());
    return ok ? 0 : 1;
  } catch (const SQLite::Exception& e) {
    std::printf("shop_check: cannot read: %s\n", e.what());
    return 1;
  }
}
