#include "order_store.h"

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/outbox/state_machine.h"
#include "shared/sqlite/outbox_table.h"

namespace order {
namespace {

void CreateOrdersAndOutbox(SQLite::Database& db) {
  db.exec(R"sql(
    CREATE TABLE IF NOT EXISTS orders (
      order_id     TEXT    PRIMARY KEY,
      customer     TEXT    NOT NULL,
      amount_minor INTEGER NOT NULL CHECK (amount_minor > 0),
      created_at   INTEGER NOT NULL
    );
  )sql");
  outbox::CreateOutboxTable(db);
}

const outbox::DbSchema& OrderDbSchema() {
  static const outbox::DbSchema* const schema =
      new outbox::DbSchema{{{"orders and outbox", CreateOrdersAndOutbox}}};
  return *schema;
}

}  // namespace

std::string OrderPlacedBody(const Order& order) {
  return absl::StrCat("order_id=", order.order_id, " customer=", order.customer,
                      " amount_minor=", order.amount_minor);
}

absl::StatusOr<std::unique_ptr<OrderStore>> OrderStore::Open(const std::string& path,
                                                             OrderQueues queues,
                                                             const outbox::Clock& clock) {
  ASSIGN_OR_RETURN(auto file, outbox::OpenSqliteFile(path, outbox::DbOptions{}, &OrderDbSchema()));
  return std::unique_ptr<OrderStore>(new OrderStore(std::move(file), std::move(queues), clock));
}

absl::StatusOr<outbox::OutgoingMessage> OrderStore::Place(const Order& order,
                                                          const std::string& message_id) {
  if (order.order_id.empty()) return absl::InvalidArgumentError("order_id: empty");
  if (order.customer.empty()) return absl::InvalidArgumentError("customer: empty");
  if (order.amount_minor <= 0) return absl::InvalidArgumentError("amount_minor: must be > 0");
  const int64_t now = clock_.NowMillis();
  outbox::OutboxMessage row =
      outbox::NewOutboxMessage({message_id, "order", order.order_id, queues_.orders, "OrderPlaced",
                                queues_.replies, OrderPlacedBody(order), ""},
                               now, retry_);
  outbox::MutexLock lock(&file_->write_mu);
  SQLite::Database& db = *file_->writer;
  RETURN_IF_ERROR(outbox::WriteTransaction(db, [&] {
    SQLite::Statement known(db, "SELECT 1 FROM orders WHERE order_id = ?");
    known.bind(1, order.order_id);
    if (known.executeStep()) return absl::AlreadyExistsError("order_id: " + order.order_id);
    SQLite::Statement insert(db, "INSERT INTO orders VALUES (?, ?, ?, ?)");
    insert.bind(1, order.order_id);
    insert.bind(2, order.customer);
    insert.bind(3, static_cast<int64_t>(order.amount_minor));
    insert.bind(4, static_cast<int64_t>(now));
    insert.exec();
    row.id = outbox::OutboxInserter(db).Insert(row);
    return absl::OkStatus();
  }));
  return outbox::ToOutgoing(row);
}

absl::StatusOr<outbox::OutboxStatus> OrderStore::MessageStatus(const std::string& message_id) {
  outbox::MutexLock lock(&file_->write_mu);
  std::optional<outbox::OutboxMessage> row;
  RETURN_IF_ERROR(outbox::Guard("load outbox row", [&] {
    row = outbox::OutboxStateTable(*file_->writer).Load(message_id);
    return absl::OkStatus();
  }));
  if (!row) return absl::NotFoundError("message_id: " + message_id);
  return row->status;
}

absl::StatusOr<outbox::AckTally> OrderStore::RecordAcks(
    const std::vector<std::string>& message_ids) {
  outbox::MutexLock lock(&file_->write_mu);
  outbox::AckTally tally;
  RETURN_IF_ERROR(outbox::WriteTransaction(*file_->writer, [&] {
    tally = outbox::RecordAcks(*file_->writer, message_ids, clock_.NowMillis());
    return absl::OkStatus();
  }));
  return tally;
}

absl::Status OrderStore::RecordPublishFailure(const std::vector<std::string>& message_ids,
                                              const std::string& error) {
  outbox::MutexLock lock(&file_->write_mu);
  return outbox::WriteTransaction(*file_->writer, [&] {
    outbox::RecordPublishFailure(*file_->writer, message_ids, error, clock_.NowMillis());
    return absl::OkStatus();
  });
}

// Nothing here re-publishes (no recovery process), so only a closed row is
// taken over: a late copy of it would be a duplicate.
absl::StatusOr<std::vector<std::string>> OrderStore::TakenOver(
    const std::vector<std::string>& message_ids) {
  outbox::MutexLock lock(&file_->write_mu);
  std::vector<std::string> taken;
  RETURN_IF_ERROR(outbox::Guard("read taken over", [&] {
    outbox::OutboxStateTable table(*file_->writer);
    for (const std::string& id : message_ids) {
      auto row = table.Load(id);
      if (row && row->status != outbox::OutboxStatus::kSending) taken.push_back(id);
    }
    return absl::OkStatus();
  }));
  return taken;
}

}  // namespace order
