// shop_recovery: re-publishes the shop's SENDING rows nobody acknowledged in
// time (backoff from shop::Retry()), under a lease; marks exhausted rows
// FAILED and alerts (to the log). Holds while nobody consumes the orders
// queue. Runs on shop_orders' database until SIGTERM.
#include <cstdio>
#include <string>

#include "shared/amqp/amqp_transport.h"
#include "shared/base/clock.h"
#include "shared/observability/alerts.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/recovery_loop.h"
#include "shared/runtime/signals.h"
#include "shared/sqlite/recovery_store.h"
#include "shop.h"

namespace {

constexpr char kUsage[] =
    "shop_recovery --amqp_url=URL --db=PATH [--queue=shop.orders] [--instance=shop-recovery-1] "
    "[--wait_s=120]";

}  // namespace

int main(int argc, char** argv) {
  outbox::BlockShutdownSignals();  // before any thread starts
  auto flags = shop::Flags::Parse(argc, argv,
                                  {{"amqp_url", ""},
                                   {"db", ""},
                                   {"queue", shop::kDefaultOrdersQueue},
                                   {"instance", "shop-recovery-1"},
                                   {"wait_s", "120"}});
  if (!flags.ok()) return shop::Usage(flags.status(), kUsage);
  auto url = flags->Url();
  auto db_path = flags->Required("db");
  auto wait_s = flags->Int("wait_s");
  for (const absl::Status& s : {url.status(), db_path.status(), wait_s.status()}) {
    if (!s.ok()) return shop::Usage(s, kUsage);
  }
  const std::string queue = flags->Get("queue");

  const outbox::Clock& clock = outbox::SystemClock::Get();
  outbox::MetricsRegistry metrics;
  // shop_orders creates and upgrades the file; recovery waits for it.
  const outbox::ProducerDb shop_db{&shop::ShopSchema(), "shop_orders", "--db", "shop"};
  auto store = outbox::RecoveryStore::OpenWhenCreated(
      *db_path, {}, shop_db, absl::Seconds(*wait_s), [](const absl::Status& why) {
        std::fprintf(stderr, "shop_recovery: waiting for the shop's database: %s\n",
                     why.ToString().c_str());
      });
  if (!store.ok()) {
    std::fprintf(stderr, "shop_recovery: %s\n", store.status().ToString().c_str());
    return 1;
  }

  outbox::AmqpPublisher publisher(*url, outbox::Topology{}, "shop-recovery");
  outbox::AlerterOptions alert_options;  // no alertmanager_url: alerts are logged only
  alert_options.service = "shop_recovery";
  outbox::Alerter alerts(alert_options);
  outbox::RecoveryOptions options;
  options.instance_id = flags->Get("instance");
  options.retry = shop::Retry();  // the policy shop_orders stamps on rows
  options.watched_queues = {queue};
  options.dead_letter_sources = {queue, shop::ReplyQueue(queue)};
  options.reply_queues = {shop::ReplyQueue(queue)};
  options.biz_key_label = "order_id";
  options.consumer_name = "shop_shipping";
  if (absl::Status valid = options.Validate(); !valid.ok()) return shop::Usage(valid, kUsage);

  outbox::RecoveryLoop recovery(**store, publisher, alerts, clock, metrics, options);
  recovery.Start();
  std::printf("shop_recovery: watching %s in %s\n", queue.c_str(), db_path->c_str());
  std::fflush(stdout);

  const std::string signal = outbox::WaitForShutdownSignal();
  recovery.Stop();  // finishes its round and gives the lease up
  alerts.Stop();
  std::printf(
      "shop_recovery: %s; republished %ld, publish failures %ld, failed %ld, "
      "deferred %ld\n",
      signal.c_str(), static_cast<long>(recovery.republished()),
      static_cast<long>(recovery.publish_failures()), static_cast<long>(recovery.failed()),
      static_cast<long>(recovery.deferred()));
  return 0;
}
