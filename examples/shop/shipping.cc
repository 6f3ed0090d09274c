// shop_shipping, the consumer: books one shipment per order, exactly once
// (the shipment and the message id in the inbox, one transaction per batch),
// and answers every OrderPlaced, new or duplicate, on its reply_to. Runs
// until SIGTERM, then stops cleanly (the batch in hand is settled).
#include <SQLiteCpp/SQLiteCpp.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "shared/amqp/amqp_transport.h"
#include "shared/base/clock.h"
#include "shared/base/mutex.h"
#include "shared/base/status_macros.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/idempotent_consumer.h"
#include "shared/runtime/signals.h"
#include "shared/sqlite/inbox.h"
#include "shared/sqlite/sqlite_file.h"
#include "shop.h"

namespace {

constexpr char kUsage[] = "shop_shipping --amqp_url=URL --db=PATH [--queue=shop.orders]";

struct OrderPlaced {
  std::string message_id;
  std::string order_id;
};

class Shipping final : public outbox::MessageHandler<OrderPlaced> {
 public:
  Shipping(outbox::SqliteFile& file, const outbox::Clock& clock)
      : file_(file), clock_(clock), inbox_(*file.writer) {}

  absl::StatusOr<OrderPlaced> Decode(const outbox::Delivery& d) override {
    if (d.type != "OrderPlaced" || d.body.rfind("order-", 0) != 0 || d.message_id.empty()) {
      return absl::InvalidArgumentError("not an OrderPlaced");  // dead-lettered
    }
    return OrderPlaced{d.message_id, d.body};
  }

  absl::StatusOr<std::vector<outbox::Applied>> ApplyBatch(
      const std::vector<OrderPlaced>& batch) override {
    std::vector<outbox::Applied> applied;
    outbox::MutexLock lock(&file_.write_mu);
    SQLite::Database& db = *file_.writer;
    RETURN_IF_ERROR(outbox::WriteTransaction(db, [&] {
      applied.clear();  // a retried transaction starts over
      for (const OrderPlaced& m : batch) {
        if (std::optional<std::string> shipment = inbox_.Find(m.message_id)) {
          applied.push_back({/*duplicate=*/true, *shipment});
          continue;
        }
        const std::string shipment = "ship-" + m.order_id;
        SQLite::Statement insert(db, "INSERT INTO shipments VALUES (?, ?, ?)");
        insert.bind(1, shipment);
        insert.bind(2, m.order_id);
        insert.bind(3, static_cast<int64_t>(clock_.NowMillis()));
        insert.exec();
        inbox_.Record(m.message_id, m.order_id, shipment, clock_.NowMillis());
        applied.push_back({/*duplicate=*/false, shipment});
      }
      return absl::OkStatus();
    }));
    return applied;
  }

  // One reply per message; its body is the id of the message it answers.
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

}  // namespace

int main(int argc, char** argv) {
  outbox::BlockShutdownSignals();  // before any thread starts
  auto flags = shop::Flags::Parse(
      argc, argv, {{"amqp_url", ""}, {"db", ""}, {"queue", shop::kDefaultOrdersQueue}});
  if (!flags.ok()) return shop::Usage(flags.status(), kUsage);
  auto url = flags->Url();
  auto db_path = flags->Required("db");
  for (const absl::Status& s : {url.status(), db_path.status()}) {
    if (!s.ok()) return shop::Usage(s, kUsage);
  }
  const std::string queue = flags->Get("queue");
  const std::string replies_queue = shop::ReplyQueue(queue);

  const outbox::Clock& clock = outbox::SystemClock::Get();
  outbox::MetricsRegistry metrics;
  auto file = outbox::OpenSqliteFile(*db_path, {}, &shop::ShippingSchema());
  if (!file.ok()) {
    std::fprintf(stderr, "shop_shipping: %s\n", file.status().ToString().c_str());
    return 1;
  }
  Shipping shipping(**file, clock);
  outbox::AmqpConsumer deliveries(*url, outbox::Topology{{queue}}, "shop-shipping", queue,
                                  /*prefetch=*/256);
  outbox::AmqpPublisher replies(*url, outbox::Topology{{replies_queue}}, "shop-shipping-replies");
  outbox::ConsumerOptions options;
  options.queue = queue;
  options.default_reply_to = replies_queue;
  outbox::IdempotentConsumer consumer(deliveries, replies, shipping, clock, metrics, options);
  consumer.Start();
  std::printf("shop_shipping: consuming %s\n", queue.c_str());
  std::fflush(stdout);

  const std::string signal = outbox::WaitForShutdownSignal();
  consumer.Stop();  // settles the batch in hand: its replies' confirms, then the acks
  std::printf("shop_shipping: %s; booked %ld, duplicates %ld, dead-lettered %ld, requeued %ld\n",
              signal.c_str(), static_cast<long>(consumer.booked()),
              static_cast<long>(consumer.duplicates()), static_cast<long>(consumer.dead_lettered()),
              static_cast<long>(consumer.requeued()));
  return 0;
}
