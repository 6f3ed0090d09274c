// The producer: an order and its OrderPlaced outbox row in one transaction,
// published right after the commit, closed by the consumer's reply; recovery
// runs in the same process.
#include "shared/base/status_macros.h"
#include "shared/sqlite/outbox_table.h"
#include "snippets.h"

namespace shop {

// Migration 1 of the shop's own schema: its table and the outbox tables.
const outbox::DbSchema& ShopSchema() {
  static const outbox::DbSchema schema{{{"orders and the outbox", [](SQLite::Database& db) {
                                           db.exec(
                                               "CREATE TABLE orders (order_id TEXT PRIMARY KEY, "
                                               "amount_minor INTEGER NOT NULL)");
                                           outbox::CreateOutboxTable(db);
                                         }}}};
  return schema;
}

absl::Status PlaceOrders(const Setup& setup, int orders) {
  OUTBOX_ASSIGN_OR_RETURN(auto producer, outbox::Producer::Start(ShopOutbox(setup)));
  for (int i = 0; i < orders; ++i) {
    const std::string order_id = "o-" + std::to_string(i);
    outbox::MessageSpec spec;
    spec.biz_type = "order";
    spec.biz_key = order_id;
    spec.message_type = "OrderPlaced";
    spec.payload = order_id;
    auto written = producer->Write(spec, [&](SQLite::Database& db) {
      SQLite::Statement insert(db, "INSERT INTO orders VALUES (?, 1250)");
      insert.bind(1, order_id);
      insert.exec();
      return absl::OkStatus();
    });
    if (!written.ok()) return written.status();  // nothing was written
  }
  // Rows close only while the producer reads the replies: wait for them.
  OUTBOX_RETURN_IF_ERROR(producer->WaitUntilClosed(absl::Now() + absl::Minutes(1)).status());
  producer->Stop();
  return absl::OkStatus();
}

}  // namespace shop
