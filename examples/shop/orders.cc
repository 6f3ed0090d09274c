// shop_orders, the producer: places orders K..K+N-1, each order row and its
// OrderPlaced outbox row in one transaction, hands each to the relay after
// its commit, and closes rows as shipping's replies come in (AckListener).
// An order already in the database (an earlier run placed it, maybe one that
// was killed) is skipped. Exits 0 once every order of its range is SENT, or
// with --serve keeps listening for replies until SIGTERM.
#include <SQLiteCpp/SQLiteCpp.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "shared/amqp/amqp_transport.h"
#include "shared/base/clock.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/ack_listener.h"
#include "shared/outbox/relay.h"
#include "shared/runtime/signals.h"
#include "shared/sqlite/sqlite_outbox.h"
#include "shop.h"

namespace {

constexpr char kUsage[] =
    "shop_orders --amqp_url=URL --db=PATH --orders=N [--first=K] [--pace_ms=M] "
    "[--queue=shop.orders] [--serve] [--timeout_s=S]";

std::atomic<bool> stop_requested{false};

// A reply's body is the id of the message it acknowledges (shipping.cc).
absl::StatusOr<std::vector<outbox::Acknowledgement>> DecodeReply(const outbox::Delivery& reply) {
  if (reply.type != "OrderShipped" || reply.body.empty()) {
    return absl::InvalidArgumentError("not an OrderShipped reply");
  }
  outbox::Acknowledgement ack;
  ack.message_id = reply.body;
  return std::vector<outbox::Acknowledgement>{ack};
}

// Writes the order and its outbox row; ALREADY_EXISTS (nothing written) when
// the order is there. A busy file is tried again a few times.
absl::StatusOr<outbox::OutgoingMessage> PlaceOrder(outbox::SqliteOutbox& outbox,
                                                   const std::string& queue, long number) {
  const std::string order_id = shop::OrderId(number);
  outbox::MessageSpec spec;
  spec.message_id = shop::MessageId(order_id);
  spec.biz_type = "order";
  spec.biz_key = order_id;
  spec.topic = queue;
  spec.message_type = "OrderPlaced";
  spec.reply_to = shop::ReplyQueue(queue);
  spec.payload = order_id;
  absl::StatusOr<outbox::OutgoingMessage> message;
  for (int attempt = 1; attempt <= 5; ++attempt) {
    message = outbox.Write(spec, [&](SQLite::Database& db) {
      SQLite::Statement exists(db, "SELECT 1 FROM orders WHERE order_id = ?");
      exists.bind(1, order_id);
      if (exists.executeStep()) return absl::AlreadyExistsError(order_id + " is placed already");
      SQLite::Statement insert(db, "INSERT INTO orders VALUES (?, ?, ?)");
      insert.bind(1, order_id);
      insert.bind(2, static_cast<int64_t>(1000 + number % 9000));
      insert.bind(3, static_cast<int64_t>(absl::ToUnixMillis(absl::Now())));
      insert.exec();
      return absl::OkStatus();
    });
    if (message.ok() || !absl::IsUnavailable(message.status())) break;
    absl::SleepFor(absl::Milliseconds(100 * attempt));
  }
  return message;
}

// The orders of the range whose outbox rows are not SENT yet. A row that is
// gone while its order is there was archived: SENT long ago.
absl::StatusOr<std::vector<std::string>> StillOpen(outbox::SqliteOutbox& outbox,
                                                   const std::vector<std::string>& message_ids,
                                                   int* failed) {
  std::vector<std::string> open;
  *failed = 0;
  for (const std::string& id : message_ids) {
    absl::StatusOr<outbox::OutboxMessage> row = outbox.Get(id);
    if (absl::IsNotFound(row.status())) continue;
    if (!row.ok()) return row.status();
    if (row->status == outbox::OutboxStatus::kSent) continue;
    if (row->status == outbox::OutboxStatus::kFailed) ++*failed;
    open.push_back(id);
  }
  return open;
}

}  // namespace

int main(int argc, char** argv) {
  outbox::BlockShutdownSignals();  // before any thread starts
  auto flags = shop::Flags::Parse(argc, argv,
                                  {{"amqp_url", ""},
                                   {"db", ""},
                                   {"orders", ""},
                                   {"first", "0"},
                                   {"pace_ms", "0"},
                                   {"queue", shop::kDefaultOrdersQueue},
                                   {"serve", "false"},
                                   {"timeout_s", "0"}});
  if (!flags.ok()) return shop::Usage(flags.status(), kUsage);
  auto url = flags->Url();
  auto db_path = flags->Required("db");
  auto orders = flags->Int("orders");
  auto first = flags->Int("first");
  auto pace_ms = flags->Int("pace_ms");
  auto timeout_s = flags->Int("timeout_s");
  for (const absl::Status& s : {url.status(), db_path.status(), orders.status(), first.status(),
                                pace_ms.status(), timeout_s.status()}) {
    if (!s.ok()) return shop::Usage(s, kUsage);
  }
  const std::string queue = flags->Get("queue");
  const std::string replies_queue = shop::ReplyQueue(queue);

  std::thread([] {
    const std::string signal = outbox::WaitForShutdownSignal();
    std::fprintf(stderr, "shop_orders: %s, stopping\n", signal.c_str());
    stop_requested = true;
  }).detach();

  const outbox::Clock& clock = outbox::SystemClock::Get();
  outbox::MetricsRegistry metrics;
  auto file = outbox::OpenSqliteFile(*db_path, {}, &shop::ShopSchema());
  if (!file.ok()) {
    std::fprintf(stderr, "shop_orders: %s\n", file.status().ToString().c_str());
    return 1;
  }
  outbox::SqliteOutbox outbox(**file, clock, shop::Retry());

  outbox::AmqpPublisher publisher(*url, outbox::Topology{{queue}}, "shop-orders-relay");
  outbox::AmqpConsumer replies(*url, outbox::Topology{{replies_queue}}, "shop-orders-acks",
                               replies_queue, /*prefetch=*/256);
  outbox::RelayOptions relay_options;
  // A message the relay could not publish by the time its first retry is due
  // is recovery's: publish it only if recovery has not yet.
  relay_options.hand_over_after = shop::Retry().DelayAfter(1);
  outbox::Relay relay(publisher, outbox, clock, metrics, relay_options);
  outbox::AckListenerOptions ack_options;
  ack_options.queue = replies_queue;
  ack_options.biz_key_label = "order_id";
  outbox::AckListener acks(replies, outbox, DecodeReply, metrics, ack_options);
  relay.Start();
  acks.Start();

  const absl::Time started = absl::Now();
  std::vector<std::string> range;
  int placed = 0, skipped = 0;
  int exit_code = 0;
  for (long number = *first; number < *first + *orders && !stop_requested; ++number) {
    absl::StatusOr<outbox::OutgoingMessage> message = PlaceOrder(outbox, queue, number);
    range.push_back(shop::MessageId(shop::OrderId(number)));
    if (absl::IsAlreadyExists(message.status())) {
      ++skipped;
      continue;
    }
    if (!message.ok()) {  // nothing was written
      std::fprintf(stderr, "shop_orders: %s\n", message.status().ToString().c_str());
      exit_code = 1;
      break;
    }
    relay.Enqueue({*std::move(message)});  // committed: publish now
    ++placed;
    if (*pace_ms > 0) absl::SleepFor(absl::Milliseconds(*pace_ms));
  }
  const absl::Duration placing = absl::Now() - started;
  std::printf("shop_orders: placed %d, skipped %d (already placed) of %ld in %.1f s\n", placed,
              skipped, *orders, absl::ToDoubleSeconds(placing));
  std::fflush(stdout);

  // Until every order of the range is SENT (or SIGTERM with --serve).
  const bool serve = flags->Switch("serve");
  const absl::Time deadline =
      *timeout_s > 0 ? started + absl::Seconds(*timeout_s) : absl::InfiniteFuture();
  std::vector<std::string> open = range;
  int failed = 0;
  absl::Time last_report = absl::Now();
  while (exit_code == 0 && !stop_requested) {
    if (!open.empty()) {
      absl::StatusOr<std::vector<std::string>> still = StillOpen(outbox, open, &failed);
      if (still.ok()) {
        open = *std::move(still);
      } else {
        std::fprintf(stderr, "shop_orders: %s\n", still.status().ToString().c_str());
      }
      if (open.empty()) {
        std::printf("shop_orders: all %zu orders of the range SENT %.1f s after the start\n",
                    range.size(), absl::ToDoubleSeconds(absl::Now() - started));
        std::fflush(stdout);
      }
    }
    if (open.empty() && !serve) break;
    if (absl::Now() > deadline) {
      std::fprintf(stderr, "shop_orders: %zu orders not SENT after --timeout_s\n", open.size());
      exit_code = 1;
      break;
    }
    if (absl::Now() - last_report > absl::Seconds(10)) {
      std::printf(
          "shop_orders: waiting for %zu replies (%d FAILED rows), relay confirmed %ld, "
          "acknowledged %ld\n",
          open.size(), failed, static_cast<long>(relay.confirmed()),
          static_cast<long>(acks.acknowledged()));
      std::fflush(stdout);
      last_report = absl::Now();
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  if (stop_requested && !serve && !open.empty()) exit_code = 1;  // stopped before done

  acks.Stop();  // the ack listener first, then the relay
  relay.Stop();
  std::printf("shop_orders: relay confirmed %ld, rows acknowledged %ld, replies %ld\n",
              static_cast<long>(relay.confirmed()), static_cast<long>(acks.acknowledged()),
              static_cast<long>(acks.replies()));
  return exit_code;
}
