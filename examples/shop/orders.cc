// shop_orders, the producer: places orders K..K+N-1, each order row and its
// OrderPlaced outbox row in one transaction (outbox::Producer: published
// after the commit, closed as shipping's replies come in). An order already
// in the database (an earlier run placed it, maybe one that was killed) is
// skipped. Exits 0 once no outbox row of the shop is SENDING or FAILED, or
// with --serve keeps closing rows until SIGTERM.
#include <SQLiteCpp/SQLiteCpp.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "shared/base/status_macros.h"
#include "shared/roles/producer.h"
#include "shared/runtime/signals.h"
#include "shop.h"

namespace {

constexpr char kUsage[] =
    "shop_orders --amqp_url=URL --db=PATH --orders=N (--message_keys=PATH | --allow_unsigned) "
    "[--first=K] [--pace_ms=M] [--queue=shop.orders] [--serve] [--timeout_s=S]";

std::atomic<bool> stop_requested{false};

// Writes the order and its outbox row; ALREADY_EXISTS (nothing written) when
// the order is there. A busy file is tried again a few times.
absl::Status PlaceOrder(outbox::Producer& producer, long number) {
  const std::string order_id = shop::OrderId(number);
  outbox::MessageSpec spec;
  spec.message_id = shop::MessageId(order_id);
  spec.biz_type = "order";
  spec.biz_key = order_id;
  spec.message_type = "OrderPlaced";
  spec.payload = order_id;
  absl::Status placed;
  for (int attempt = 1; attempt <= 5; ++attempt) {
    placed = producer
                 .Write(spec,
                        [&](SQLite::Database& db) {
                          SQLite::Statement exists(db, "SELECT 1 FROM orders WHERE order_id = ?");
                          exists.bind(1, order_id);
                          if (exists.executeStep()) {
                            return absl::AlreadyExistsError(order_id + " is placed already");
                          }
                          SQLite::Statement insert(db, "INSERT INTO orders VALUES (?, ?, ?)");
                          insert.bind(1, order_id);
                          insert.bind(2, static_cast<int64_t>(1000 + number % 9000));
                          insert.bind(3, static_cast<int64_t>(absl::ToUnixMillis(absl::Now())));
                          insert.exec();
                          return absl::OkStatus();
                        })
                 .status();
    if (placed.ok() || !absl::IsUnavailable(placed)) break;
    absl::SleepFor(absl::Milliseconds(100 * attempt));
  }
  return placed;
}

// Places orders first..first+count-1, `pace_ms` apart; 1 when one could not
// be written (nothing of it was).
int PlaceRange(outbox::Producer& producer, long first, long count, long pace_ms) {
  const absl::Time started = absl::Now();
  int placed = 0, skipped = 0;
  for (long number = first; number < first + count && !stop_requested; ++number) {
    const absl::Status s = PlaceOrder(producer, number);
    if (absl::IsAlreadyExists(s)) {
      ++skipped;
      continue;
    }
    if (!s.ok()) return shop::Fail("shop_orders", s);
    ++placed;
    if (pace_ms > 0) absl::SleepFor(absl::Milliseconds(pace_ms));
  }
  std::printf("shop_orders: placed %d, skipped %d (already placed) of %ld in %.1f s\n", placed,
              skipped, count, absl::ToDoubleSeconds(absl::Now() - started));
  std::fflush(stdout);
  return 0;
}

// Until no row is SENDING or FAILED (0), or `deadline` (1), or SIGTERM (1,
// or 0 with --serve), reporting every 10 s. Asked on the producer's own
// connection.
int AwaitClosed(outbox::Producer& producer, absl::Time started, absl::Time deadline, bool serve) {
  absl::Time last_report = absl::Now();
  while (!stop_requested) {
    auto counts = producer.WaitUntilClosed(std::min(deadline, absl::Now() + absl::Seconds(1)));
    if (counts.ok() && counts->failed == 0) {
      std::printf("shop_orders: every row SENT %.1f s after the start\n",
                  absl::ToDoubleSeconds(absl::Now() - started));
      std::fflush(stdout);
      return 0;
    }
    if (absl::Now() >= deadline) return shop::Fail("shop_orders", counts.status());
    if (absl::Now() - last_report > absl::Seconds(10)) {
      auto now = producer.CountRows();
      if (now.ok()) {
        std::printf("shop_orders: waiting for %ld replies (%ld FAILED rows), relay confirmed %ld\n",
                    static_cast<long>(now->sending), static_cast<long>(now->failed),
                    static_cast<long>(producer.confirmed()));
      }
      std::fflush(stdout);
      last_report = absl::Now();
    }
  }
  return serve ? 0 : 1;  // stopped before done
}

struct Args {
  outbox::AmqpUrl url;
  std::string db;
  long orders = 0, first = 0, pace_ms = 0, timeout_s = 0;
  std::string queue;
  bool serve = false;
  outbox::Signing signing;
};

absl::StatusOr<Args> ParseArgs(int argc, char** argv) {
  auto flags = shop::Flags::Parse(argc, argv,
                                  shop::Flags::WithSigning({{"amqp_url", ""},
                                                            {"db", ""},
                                                            {"orders", ""},
                                                            {"first", "0"},
                                                            {"pace_ms", "0"},
                                                            {"queue", shop::kDefaultOrdersQueue},
                                                            {"serve", "false"},
                                                            {"timeout_s", "0"}}));
  if (!flags.ok()) return flags.status();
  Args args;
  OUTBOX_ASSIGN_OR_RETURN(args.url, flags->Url());
  OUTBOX_ASSIGN_OR_RETURN(args.db, flags->Required("db"));
  OUTBOX_ASSIGN_OR_RETURN(args.orders, flags->Int("orders"));
  OUTBOX_ASSIGN_OR_RETURN(args.first, flags->Int("first"));
  OUTBOX_ASSIGN_OR_RETURN(args.pace_ms, flags->Int("pace_ms"));
  OUTBOX_ASSIGN_OR_RETURN(args.timeout_s, flags->Int("timeout_s"));
  OUTBOX_ASSIGN_OR_RETURN(args.signing, flags->Signing());
  args.queue = flags->Get("queue");
  args.serve = flags->Switch("serve");
  return args;
}

}  // namespace

int main(int argc, char** argv) {
  outbox::BlockShutdownSignals();  // before any thread starts
  auto args = ParseArgs(argc, argv);
  if (!args.ok()) return shop::Usage(args.status(), kUsage);
  std::thread([] { stop_requested = !outbox::WaitForShutdownSignal().empty(); }).detach();

  auto file = outbox::OpenSqliteFile(args->db, {}, &shop::ShopSchema());
  if (!file.ok()) return shop::Fail("shop_orders", file.status());
  outbox::Producer::Options options;
  options.amqp = args->url;
  options.queue = args->queue;  // replies on "<queue>.replies"
  options.signing = args->signing;
  options.retry = shop::Retry();  // stamped on each row; shop_recovery applies it
  options.name = "shop-orders";
  options.biz_key_label = "order_id";
  auto producer = outbox::Producer::Start(**file, options);
  if (!producer.ok()) return shop::Fail("shop_orders", producer.status());

  const absl::Time started = absl::Now();
  const absl::Time deadline =
      args->timeout_s > 0 ? started + absl::Seconds(args->timeout_s) : absl::InfiniteFuture();
  int exit_code = PlaceRange(**producer, args->first, args->orders, args->pace_ms);
  if (exit_code == 0) exit_code = AwaitClosed(**producer, started, deadline, args->serve);
  while (args->serve && !stop_requested) absl::SleepFor(absl::Milliseconds(200));
  (*producer)->Stop();  // the ack listener first, then the relay
  std::printf("shop_orders: relay confirmed %ld, rows acknowledged %ld, replies %ld\n",
              static_cast<long>((*producer)->confirmed()),
              static_cast<long>((*producer)->acknowledged()),
              static_cast<long>((*producer)->replies()));
  return exit_code;
}
