#include "order_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/sqlite/outbox_table.h"

namespace order {

std::string OrderPlacedBody(const Order& order) {
  return absl::StrCat("order_id=", order.order_id, " customer=", order.customer,
                      " amount_minor=", order.amount_minor);
}

const outbox::DbSchema& OrderDbSchema() {
  static const outbox::DbSchema* const schema =
      new outbox::DbSchema{{{"orders and the outbox", [](SQLite::Database& db) {
                               db.exec(R"sql(
                                 CREATE TABLE orders (
                                   order_id     TEXT    PRIMARY KEY,
                                   customer     TEXT    NOT NULL,
                                   amount_minor INTEGER NOT NULL CHECK (amount_minor > 0),
                                   created_at   INTEGER NOT NULL
                                 );
                               )sql");
                               outbox::CreateOutboxTable(db);
                             }}}};
  return *schema;
}

absl::StatusOr<std::unique_ptr<OrderStore>> OrderStore::Open(const std::string& path,
                                                             const outbox::Clock& clock) {
  OUTBOX_ASSIGN_OR_RETURN(auto file,
                          outbox::OpenSqliteFile(path, outbox::DbOptions{}, &OrderDbSchema()));
  return std::unique_ptr<OrderStore>(new OrderStore(std::move(file), clock));
}

absl::Status OrderStore::Check(const Order& order) {
  if (order.order_id.empty()) return absl::InvalidArgumentError("order_id: empty");
  if (order.customer.empty()) return absl::InvalidArgumentError("customer: empty");
  if (order.amount_minor <= 0) return absl::InvalidArgumentError("amount_minor: must be > 0");
  return absl::OkStatus();
}

outbox::MessageSpec OrderStore::OrderPlaced(const Order& order) {
  outbox::MessageSpec spec;
  spec.biz_type = "order";
  spec.biz_key = order.order_id;
  spec.message_type = "OrderPlaced";
  spec.payload = OrderPlacedBody(order);
  return spec;
}

outbox::BusinessWrite OrderStore::InsertOrder(Order order) const {
  const outbox::Clock& clock = clock_;
  return [order = std::move(order), &clock](SQLite::Database& db) -> absl::Status {
    SQLite::Statement known(db, "SELECT 1 FROM orders WHERE order_id = ?");
    known.bind(1, order.order_id);
    if (known.executeStep()) return absl::AlreadyExistsError("order_id: " + order.order_id);
    SQLite::Statement insert(db, "INSERT INTO orders VALUES (?, ?, ?, ?)");
    insert.bind(1, order.order_id);
    insert.bind(2, order.customer);
    insert.bind(3, static_cast<int64_t>(order.amount_minor));
    insert.bind(4, static_cast<int64_t>(clock.NowMillis()));
    insert.exec();
    return absl::OkStatus();
  };
}

}  // namespace order
