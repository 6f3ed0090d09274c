// The consumer: books one shipment per order, exactly once, and answers
// every message, new or duplicate, on its reply_to.
#include "snippets.h"

#include "shared/amqp/amqp_transport.h"
#include "shared/base/status_macros.h"
#include "shared/outbox/idempotent_consumer.h"
#include "shared/sqlite/inbox.h"
#include "shared/sqlite/sqlite_file.h"

namespace shop {

struct OrderPlaced {
  std::string message_id;
  std::string order_id;
};

class Shipping final : public outbox::MessageHandler<OrderPlaced> {
 public:
  Shipping(outbox::SqliteFile& file, const outbox::Clock& clock)
      : file_(file), clock_(clock), inbox_(*file.writer) {}

  absl::StatusOr<OrderPlaced> Decode(const outbox::Delivery& d) override {
    if (d.type != "OrderPlaced" || d.body.empty()) {
      return absl::InvalidArgumentError("not an OrderPlaced");  // dead-lettered
    }
    return OrderPlaced{d.message_id, d.body};
  }

  // One transaction for the whole batch: the shipments and the inbox rows.
  absl::StatusOr<std::vector<outbox::Applied>> ApplyBatch(
      const std::vector<OrderPlaced>& batch) override {
    std::vector<outbox::Applied> applied;
    outbox::MutexLock lock(&file_.write_mu);
    SQLite::Database& db = *file_.writer;
    RETURN_IF_ERROR(outbox::WriteTransaction(db, [&] {
      applied.clear();
      for (const OrderPlaced& m : batch) {
        if (std::optional<std::string> shipment = inbox_.Find(m.message_id)) {
          applied.push_back({/*duplicate=*/true, *shipment});
          continue;
        }
        const std::string shipment = "ship-" + m.order_id;
        SQLite::Statement insert(db, "INSERT INTO shipments VALUES (?, ?)");
        insert.bind(1, shipment);
        insert.bind(2, m.order_id);
        insert.exec();
        inbox_.Record(m.message_id, m.order_id, shipment, clock_.NowMillis());
        applied.push_back({/*duplicate=*/false, shipment});
      }
      return absl::OkStatus();
    }));
    return applied;
  }

  // One reply per message; its body names the message it acknowledges.
  std::vector<outbox::Reply> Replies(
      const std::vector<outbox::Answered<OrderPlaced>>& batch) override {
    std::vector<outbox::Reply> replies;
    for (size_t i = 0; i < batch.size(); ++i) {
      outbox::OutgoingMessage reply;
      reply.topic = batch[i].reply_to;
      reply.message_id = batch[i].message.message_id + ".shipped";
      reply.type = "OrderShipped";
      reply.body = batch[i].message.message_id;
      replies.push_back({reply, {i}});
    }
    return replies;
  }

 private:
  outbox::SqliteFile& file_;
  const outbox::Clock& clock_;
  outbox::Inbox inbox_;  // used under file_.write_mu only
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
  const outbox::Clock& clock = outbox::SystemClock::Get();
  outbox::MetricsRegistry metrics;
  ASSIGN_OR_RETURN(auto file, outbox::OpenSqliteFile(setup.shipping_db, {}, &ShippingSchema()));
  Shipping shipping(*file, clock);

  outbox::AmqpConsumer deliveries(setup.amqp, outbox::Topology{{kOrders}}, "shipping", kOrders,
                                  /*prefetch=*/256);
  outbox::AmqpPublisher replies(setup.amqp, outbox::Topology{{kReplies}}, "shipping-replies");
  outbox::ConsumerOptions options;
  options.queue = kOrders;
  options.default_reply_to = kReplies;
  outbox::IdempotentConsumer consumer(deliveries, replies, shipping, clock, metrics, options);
  consumer.Start();
  WaitUntil([&] { return consumer.booked() + consumer.duplicates() >= orders; });
  consumer.Stop();  // waits for the last replies' confirms, then acks
  return absl::OkStatus();
}

}  // namespace shop
