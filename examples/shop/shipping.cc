// shop_shipping, the consumer: books one shipment per order, exactly once
// (outbox::Consumer over the library's handler: the shipment and the
// message id in the inbox, one transaction per batch), and answers every
// OrderPlaced, new or duplicate, on its reply_to in the library's reply
// format. Runs until SIGTERM, then stops cleanly (the batch in hand is
// settled).
#include <SQLiteCpp/SQLiteCpp.h>

#include <cstdio>
#include <string>

#include "shared/base/clock.h"
#include "shared/roles/consumer.h"
#include "shared/runtime/signals.h"
#include "shared/sqlite/sqlite_file.h"
#include "shared/sqlite/sqlite_message_handler.h"
#include "shop.h"

namespace {

constexpr char kUsage[] =
    "shop_shipping --amqp_url=URL --db=PATH (--message_keys=PATH | --allow_unsigned) "
    "[--queue=shop.orders]";

struct OrderPlaced {
  std::string message_id;
  std::string order_id;
};

// A copy whose message id was pruned from the inbox is still found by its
// order: shipments are kept for good.
const outbox::AppliedByKey kShipmentsByOrder{"shipments", "order_id", "shipment_id"};

class Shipping final : public outbox::SqliteMessageHandler<OrderPlaced> {
 public:
  Shipping(outbox::SqliteFile& file, const outbox::Clock& clock)
      : SqliteMessageHandler(file, clock, {outbox::InboxTable{}, kShipmentsByOrder}),
        clock_(clock) {}

  absl::StatusOr<OrderPlaced> Decode(const outbox::Delivery& d) override {
    if (d.type != "OrderPlaced" || d.body.rfind("order-", 0) != 0) {
      return absl::InvalidArgumentError("not an OrderPlaced");  // dead-lettered
    }
    return OrderPlaced{d.message_id, d.body};
  }
  std::string BusinessKey(const OrderPlaced& m) override { return m.order_id; }

  // A new order only, inside the batch's transaction: its shipment.
  absl::StatusOr<std::string> Apply(SQLite::Database& tx, const OrderPlaced& m) override {
    const std::string shipment = "ship-" + m.order_id;
    SQLite::Statement insert(tx, "INSERT INTO shipments VALUES (?, ?, ?)");
    insert.bind(1, shipment);
    insert.bind(2, m.order_id);
    insert.bind(3, static_cast<int64_t>(clock_.NowMillis()));
    insert.exec();
    return shipment;
  }

 private:
  const outbox::Clock& clock_;
};

}  // namespace

int main(int argc, char** argv) {
  outbox::BlockShutdownSignals();  // before any thread starts
  auto flags =
      shop::Flags::Parse(argc, argv,
                         shop::Flags::WithSigning(
                             {{"amqp_url", ""}, {"db", ""}, {"queue", shop::kDefaultOrdersQueue}}));
  if (!flags.ok()) return shop::Usage(flags.status(), kUsage);
  auto url = flags->Url();
  auto db_path = flags->Required("db");
  auto signing = flags->Signing();
  for (const absl::Status& s : {url.status(), db_path.status(), signing.status()}) {
    if (!s.ok()) return shop::Usage(s, kUsage);
  }

  auto file = outbox::OpenSqliteFile(*db_path, {}, &shop::ShippingSchema());
  if (!file.ok()) return shop::Fail("shop_shipping", file.status());
  Shipping shipping(**file, outbox::SystemClock::Get());
  outbox::Consumer::Options options;
  options.amqp = *url;
  options.queue = flags->Get("queue");  // a message without reply_to: "<queue>.replies"
  options.signing = *signing;           // checks each order, signs each reply
  options.name = "shop-shipping";
  auto consumer = outbox::Consumer::Start(shipping, options);
  if (!consumer.ok()) return shop::Fail("shop_shipping", consumer.status());
  std::printf("shop_shipping: consuming %s\n", options.queue.c_str());
  std::fflush(stdout);

  const std::string signal = outbox::WaitForShutdownSignal();
  (*consumer)->Stop();  // settles the batch in hand: its replies' confirms, then the acks
  std::printf("shop_shipping: %s; booked %ld, duplicates %ld, dead-lettered %ld, requeued %ld\n",
              signal.c_str(), static_cast<long>((*consumer)->booked()),
              static_cast<long>((*consumer)->duplicates()),
              static_cast<long>((*consumer)->dead_lettered()),
              static_cast<long>((*consumer)->requeued()));
  return 0;
}
