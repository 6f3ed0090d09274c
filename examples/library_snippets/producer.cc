// The producer: an order and its OrderPlaced outbox row in one transaction,
// published right after the commit, closed by the consumer's reply.
#include "snippets.h"

#include "shared/amqp/amqp_transport.h"
#include "shared/base/status_macros.h"
#include "shared/outbox/ack_listener.h"
#include "shared/outbox/relay.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/sqlite/sqlite_outbox.h"

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

// A reply's body is the id of the message it acknowledges (consumer.cc).
absl::StatusOr<std::vector<outbox::Acknowledgement>> DecodeReply(const outbox::Delivery& reply) {
  if (reply.body.empty()) return absl::InvalidArgumentError("empty reply");
  outbox::Acknowledgement ack;
  ack.message_id = reply.body;
  return std::vector<outbox::Acknowledgement>{ack};
}

absl::Status PlaceOrders(const Setup& setup, int orders) {
  const outbox::Clock& clock = outbox::SystemClock::Get();
  outbox::MetricsRegistry metrics;
  ASSIGN_OR_RETURN(auto file, outbox::OpenSqliteFile(setup.shop_db, {}, &ShopSchema()));
  outbox::SqliteOutbox outbox(*file, clock, Retry());  // stamps the attempt budget on rows

  outbox::AmqpPublisher publisher(setup.amqp, outbox::Topology{{kOrders}}, "shop-relay");
  outbox::AmqpConsumer replies(setup.amqp, outbox::Topology{{kReplies}}, "shop-acks", kReplies,
                               /*prefetch=*/256);
  outbox::RelayOptions relay_options;
  // A message the relay held this long (the broker away) may have been
  // re-published by recovery meanwhile: it asks the table before sending.
  relay_options.hand_over_after = Retry().base_delay;
  outbox::Relay relay(publisher, outbox, clock, metrics, relay_options);
  outbox::AckListenerOptions ack_options;
  ack_options.queue = kReplies;
  outbox::AckListener acks(replies, outbox, DecodeReply, metrics, ack_options);
  relay.Start();
  acks.Start();

  for (int i = 0; i < orders; ++i) {
    const std::string order_id = "o-" + std::to_string(i);
    outbox::MessageSpec spec;
    spec.message_id = "m-" + order_id;  // unique per message: the consumer's dedup key
    spec.biz_type = "order";
    spec.biz_key = order_id;
    spec.topic = kOrders;
    spec.message_type = "OrderPlaced";
    spec.reply_to = kReplies;
    spec.payload = order_id;
    auto message = outbox.Write(spec, [&](SQLite::Database& db) {
      SQLite::Statement insert(db, "INSERT INTO orders VALUES (?, 1250)");
      insert.bind(1, order_id);
      insert.exec();
      return absl::OkStatus();
    });
    if (!message.ok()) return message.status();  // nothing was written
    relay.Enqueue({*std::move(message)});        // committed: publish now
  }

  WaitUntil([&] { return acks.acknowledged() >= orders; });
  acks.Stop();
  relay.Stop();
  return absl::OkStatus();
}

}  // namespace shop
