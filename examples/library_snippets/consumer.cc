// The consumer: books one shipment per order, exactly once, and answers
// every message, new or duplicate, on its reply_to. The library looks each
// message up in the inbox and records it there, in one transaction per
// batch, and answers in the format the producer reads; the shop writes what
// one new order changes.
#include "snippets.h"

#include "shared/base/status_macros.h"
#include "shared/roles/consumer.h"
#include "shared/sqlite/sqlite_message_handler.h"

namespace shop {

struct OrderPlaced {
  std::string message_id;
  std::string order_id;
};

class Shipping final : public outbox::SqliteMessageHandler<OrderPlaced> {
 public:
  using SqliteMessageHandler::SqliteMessageHandler;

  absl::StatusOr<OrderPlaced> Decode(const outbox::Delivery& d) override {
    if (d.type != "OrderPlaced" || d.body.empty()) {
      return absl::InvalidArgumentError("not an OrderPlaced");  // dead-lettered
    }
    return OrderPlaced{d.message_id, d.body};
  }
  std::string BusinessKey(const OrderPlaced& m) override { return m.order_id; }

  // A new order only, inside the batch's transaction: its shipment.
  absl::StatusOr<std::string> Apply(SQLite::Database& tx, const OrderPlaced& m) override {
    const std::string shipment = "ship-" + m.order_id;
    SQLite::Statement insert(tx, "INSERT INTO shipments VALUES (?, ?)");
    insert.bind(1, shipment);
    insert.bind(2, m.order_id);
    insert.exec();
    return shipment;
  }
};

const outbox::DbSchema& ShippingSchema() {
  static const outbox::DbSchema schema{{{"shipments and the inbox", [](SQLite::Database& db) {
                                           db.exec(
                                               "CREATE TABLE shipments (shipment_id TEXT PRIMARY "
                                               "KEY, order_id TEXT NOT NULL UNIQUE)");
                                           outbox::CreateInboxTable(db);
                                         }}}};
  return schema;
}

absl::Status ShipOrders(const Setup& setup, int orders) {
  OUTBOX_ASSIGN_OR_RETURN(auto file,
                          outbox::OpenSqliteFile(setup.shipping_db, {}, &ShippingSchema()));
  Shipping shipping(*file, outbox::SystemClock::Get());
  outbox::Consumer::Options options;
  options.amqp = setup.amqp;
  options.queue = kOrders;
  options.signing = setup.signing;  // checks each order, signs each reply
  OUTBOX_ASSIGN_OR_RETURN(auto consumer, outbox::Consumer::Start(shipping, options));
  WaitUntil([&] { return consumer->booked() + consumer->duplicates() >= orders; });
  consumer->Stop();  // waits for the last replies' confirms, then acks
  return absl::OkStatus();
}

}  // namespace shop
