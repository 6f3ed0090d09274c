// order_bench: orders per second that examples/order_service commits (its
// own code: OrderStore and OrderService, on the library's outbox::Producer)
// with --threads callers of OrderService::Place, on a real broker node.
// A consumer written as docs/library.md shows (outbox::Consumer over a
// SqliteMessageHandler: one shipment row per order, the inbox, a reply to
// each message) books every order on a file of its own and answers, so the
// producer's ack listener closes rows while the callers write, as
// accounting_service does for payment_service under outbox_bench (and with
// its default batching). Every
// message is signed (a random key of the run). Prints the orders committed
// per second in the measured window (after --warmup), Place's latency, the
// messages per group commit, the process's CPU, and the drain to SENT.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "order_service.h"
#include "order_store.h"
#include "shared/outbox/message_auth.h"
#include "shared/roles/consumer.h"
#include "shared/sqlite/inbox.h"
#include "shared/sqlite/sqlite_message_handler.h"

ABSL_FLAG(std::string, amqp_url, "", "the broker (required)");
ABSL_FLAG(int, threads, 32, "concurrent callers of OrderService::Place");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(10), "measured phase");
ABSL_FLAG(absl::Duration, warmup, absl::Seconds(3), "phase before the measured one");
// The consumer's batching: accounting_service's defaults (--consume_linger_ms,
// --consume_linger_batch, --prefetch), so it answers as payment_service's consumer does.
ABSL_FLAG(absl::Duration, consumer_linger, absl::Milliseconds(20),
          "a batch smaller than --consumer_linger_batch waits this long for more");
ABSL_FLAG(int, consumer_linger_batch, 4, "a batch this big is taken at once");
ABSL_FLAG(int, consumer_prefetch, 256, "most deliveries in one consumer batch");
ABSL_FLAG(absl::Duration, drain_timeout, absl::Seconds(60), "wait for every row to be SENT");
ABSL_FLAG(std::string, dir, "", "where the files are made (default: a new dir in $TMPDIR or /tmp)");
ABSL_FLAG(std::string, label, "order", "name of this run, printed in the report");
ABSL_FLAG(bool, json, false, "also print the figures as one JSON object on the last line");

namespace order::bench {
namespace {

[[noreturn]] void Die(const absl::Status& s) {
  std::fprintf(stderr, "order_bench: %s\n", s.ToString().c_str());
  std::exit(2);
}

struct Placed {
  std::string message_id;
  std::string order_id;
};

// The consumer's side: one shipment per order, in the batch's transaction.
class Shipping final : public outbox::SqliteMessageHandler<Placed> {
 public:
  using SqliteMessageHandler::SqliteMessageHandler;

  absl::StatusOr<Placed> Decode(const outbox::Delivery& d) override {
    // "order_id=<id> customer=... amount_minor=..." (OrderPlacedBody)
    const size_t start = d.body.find("order_id=");
    if (d.type != "OrderPlaced" || start != 0) {
      return absl::InvalidArgumentError("not an OrderPlaced");
    }
    const size_t end = d.body.find(' ');
    return Placed{d.message_id, d.body.substr(9, end == std::string::npos ? end : end - 9)};
  }
  std::string BusinessKey(const Placed& m) override { return m.order_id; }
  absl::StatusOr<std::string> Apply(SQLite::Database& tx, const Placed& m) override {
    SQLite::Statement insert(tx, "INSERT INTO shipments VALUES (?, ?)");
    insert.bind(1, "ship-" + m.order_id);
    insert.bind(2, m.order_id);
    insert.exec();
    return "ship-" + m.order_id;
  }
};

const outbox::DbSchema& ShippingSchema() {
  static const outbox::DbSchema* const schema =
      new outbox::DbSchema{{{"shipments and the inbox", [](SQLite::Database& db) {
                               db.exec(
                                   "CREATE TABLE shipments (shipment_id TEXT PRIMARY KEY, "
                                   "order_id TEXT NOT NULL UNIQUE)");
                               outbox::CreateInboxTable(db);
                             }}}};
  return *schema;
}

outbox::MessageKeys RandomKeys() {
  std::random_device rd;
  std::string secret;
  for (int i = 0; i < 32; ++i) absl::StrAppendFormat(&secret, "%02x", rd() & 0xff);
  auto keys = outbox::MessageKeys::Parse("order-bench " + secret);
  if (!keys.ok()) Die(keys.status());
  return *std::move(keys);
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(i), v.end());
  return v[i];
}

int Run() {
  auto url = outbox::AmqpUrl::Parse(absl::GetFlag(FLAGS_amqp_url));
  if (!url.ok()) Die(url.status());
  std::string dir = absl::GetFlag(FLAGS_dir);
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    dir = absl::StrCat(tmp ? tmp : "/tmp", "/order_bench.", getpid());
  }
  std::filesystem::create_directories(dir);
  const int threads = absl::GetFlag(FLAGS_threads);
  const absl::Duration warmup = absl::GetFlag(FLAGS_warmup);
  const absl::Duration duration = absl::GetFlag(FLAGS_duration);
  const std::string run = absl::StrCat(getpid(), "-", absl::ToUnixMillis(absl::Now()));
  const std::string queue = absl::StrCat("order_bench.", run, ".ORDERS");
  const outbox::Signing signing = outbox::Signing::With(RandomKeys());

  auto shipping_file = outbox::OpenSqliteFile(dir + "/shipping.db", {}, &ShippingSchema());
  if (!shipping_file.ok()) Die(shipping_file.status());
  Shipping shipping(**shipping_file, outbox::SystemClock::Get());
  outbox::Consumer::Options consumer_options;
  consumer_options.amqp = *url;
  consumer_options.queue = queue;
  consumer_options.signing = signing;
  consumer_options.name = "order-bench-shipping";
  consumer_options.linger = absl::GetFlag(FLAGS_consumer_linger);
  consumer_options.linger_batch = absl::GetFlag(FLAGS_consumer_linger_batch);
  consumer_options.prefetch = absl::GetFlag(FLAGS_consumer_prefetch);
  auto consumer = outbox::Consumer::Start(shipping, consumer_options);
  if (!consumer.ok()) Die(consumer.status());

  auto store = OrderStore::Open(dir + "/orders.db", outbox::SystemClock::Get());
  if (!store.ok()) Die(store.status());
  auto service = OrderService::Start(**store, {*url, queue, "", signing});
  if (!service.ok()) Die(service.status());
  OrderService& orders = **service;

  std::atomic<bool> stop{false}, measuring{false};
  std::atomic<int64_t> ok_in_window{0}, failed{0};
  std::vector<std::vector<double>> latencies(static_cast<size_t>(threads));
  std::vector<std::thread> callers;
  std::string first_error;
  std::atomic<bool> have_error{false};
  for (int t = 0; t < threads; ++t) {
    callers.emplace_back([&, t] {
      for (int64_t n = 0; !stop.load(); ++n) {
        const Order order{absl::StrCat("o-", run, "-", t, "-", n), "customer-" + std::to_string(t),
                          1250};
        const absl::Time before = absl::Now();
        auto placed = orders.Place(order);
        const double ms = absl::ToDoubleMilliseconds(absl::Now() - before);
        if (!placed.ok()) {
          ++failed;
          if (!have_error.exchange(true)) first_error = placed.status().ToString();
          continue;
        }
        if (measuring.load()) {
          ++ok_in_window;
          latencies[static_cast<size_t>(t)].push_back(ms);
        }
      }
    });
  }
  absl::SleepFor(warmup);
  const int64_t groups_before = orders.producer().group_commits();
  const int64_t written_before = orders.producer().written();
  const double cpu_before = CpuSeconds();
  const absl::Time window_start = absl::Now();
  measuring = true;
  absl::SleepFor(duration);
  measuring = false;
  const double window = absl::ToDoubleSeconds(absl::Now() - window_start);
  const double cpu = CpuSeconds() - cpu_before;
  const int64_t groups = orders.producer().group_commits() - groups_before;
  const int64_t written = orders.producer().written() - written_before;
  stop = true;
  for (std::thread& c : callers) c.join();

  const absl::Time drain_start = absl::Now();
  auto closed = orders.producer().WaitUntilClosed(drain_start + absl::GetFlag(FLAGS_drain_timeout));
  const absl::Duration drained = absl::Now() - drain_start;

  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  const double committed_per_s = static_cast<double>(ok_in_window.load()) / window;
  const double p50 = Percentile(all, 0.50), p99 = Percentile(all, 0.99);
  const double per_group = groups > 0 ? static_cast<double>(written) / groups : 0;
  std::printf("order_bench %s: %d callers of OrderService::Place, %s measured after %s warm-up\n",
              absl::GetFlag(FLAGS_label).c_str(), threads, absl::FormatDuration(duration).c_str(),
              absl::FormatDuration(warmup).c_str());
  std::printf("  %-36s %.0f orders/s  (%lld in the window, %lld failed in all)\n",
              "committed (Place returned OK)", committed_per_s,
              static_cast<long long>(ok_in_window.load()), static_cast<long long>(failed.load()));
  if (have_error.load()) std::printf("  %-36s %s\n", "first error", first_error.c_str());
  std::printf("  %-36s p50 %.2f ms  p99 %.2f ms\n", "Place latency", p50, p99);
  std::printf("  %-36s %.1f  (%lld group commits)\n", "orders per group commit", per_group,
              static_cast<long long>(groups));
  std::printf("  %-36s %.0f %%  (callers, producer and consumer)\n",
              "order_bench CPU (100% = 1 core)", 100 * cpu / window);
  if (closed.ok()) {
    std::printf("  %-36s all SENT after %s: sent %lld, failed %lld; booked %lld, duplicates %lld\n",
                "drain after driving",
                absl::FormatDuration(absl::Trunc(drained, absl::Milliseconds(1))).c_str(),
                static_cast<long long>(closed->sent), static_cast<long long>(closed->failed),
                static_cast<long long>((*consumer)->booked()),
                static_cast<long long>((*consumer)->duplicates()));
  } else {
    std::printf("  %-36s %s\n", "drain after driving", closed.status().ToString().c_str());
  }
  if (absl::GetFlag(FLAGS_json)) {
    std::printf(
        "{\"label\":\"%s\",\"threads\":%d,\"committed_per_s\":%.1f,\"failed\":%lld,"
        "\"place_p50_ms\":%.3f,\"place_p99_ms\":%.3f,\"orders_per_group\":%.2f,"
        "\"cpu_percent\":%.1f,\"all_sent\":%s}\n",
        absl::GetFlag(FLAGS_label).c_str(), threads, committed_per_s,
        static_cast<long long>(failed.load()), p50, p99, per_group, 100 * cpu / window,
        closed.ok() ? "true" : "false");
  }
  orders.Stop();
  (*consumer)->Stop();
  std::filesystem::remove_all(dir);
  return closed.ok() && failed.load() == 0 ? 0 : 1;
}

}  // namespace
}  // namespace order::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "order_bench --amqp_url=URL [--threads=32] [--duration=10s]: orders/s examples/order_service "
      "commits");
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_amqp_url).empty()) {
    std::fprintf(stderr, "order_bench: --amqp_url is required\n");
    return 2;
  }
  return order::bench::Run();
}
