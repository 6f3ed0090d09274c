// shop_recovery: re-publishes the shop's SENDING rows nobody acknowledged in
// time (backoff from shop::Retry()), under a lease, signed as shop_orders
// signs them; marks exhausted rows FAILED and alerts (to the log). Holds
// while nobody consumes the orders queue. Runs on shop_orders' database
// (outbox::Recovery) until SIGTERM.
#include <cstdio>
#include <string>

#include "shared/roles/recovery.h"
#include "shared/runtime/signals.h"
#include "shop.h"

namespace {

constexpr char kUsage[] =
    "shop_recovery --amqp_url=URL --db=PATH (--message_keys=PATH | --allow_unsigned) "
    "[--queue=shop.orders] [--instance=shop-recovery-1] [--wait_s=120]";

}  // namespace

int main(int argc, char** argv) {
  outbox::BlockShutdownSignals();  // before any thread starts
  auto flags = shop::Flags::Parse(argc, argv,
                                  shop::Flags::WithSigning({{"amqp_url", ""},
                                                            {"db", ""},
                                                            {"queue", shop::kDefaultOrdersQueue},
                                                            {"instance", "shop-recovery-1"},
                                                            {"wait_s", "120"}}));
  if (!flags.ok()) return shop::Usage(flags.status(), kUsage);
  auto url = flags->Url();
  auto db_path = flags->Required("db");
  auto wait_s = flags->Int("wait_s");
  auto signing = flags->Signing();
  for (const absl::Status& s :
       {url.status(), db_path.status(), wait_s.status(), signing.status()}) {
    if (!s.ok()) return shop::Usage(s, kUsage);
  }

  outbox::Recovery::Options options;
  options.amqp = *url;
  // shop_orders creates and upgrades the file; recovery waits for it.
  options.db = *db_path;
  options.producer_db = {&shop::ShopSchema(), "shop_orders", "--db", "shop"};
  options.wait_for_db = absl::Seconds(*wait_s);
  options.on_wait = [](const absl::Status& why) {
    std::fprintf(stderr, "shop_recovery: waiting for the shop's database: %s\n",
                 why.ToString().c_str());
  };
  options.queue = flags->Get("queue");  // watched; its replies on "<queue>.replies"
  options.signing = *signing;
  options.recovery.instance_id = flags->Get("instance");
  options.recovery.retry = shop::Retry();  // the policy shop_orders stamps on rows
  options.recovery.biz_key_label = "order_id";
  options.recovery.consumer_name = "shop_shipping";
  options.alerts.service = "shop_recovery";  // no alertmanager_url: alerts are logged only
  auto recovery = outbox::Recovery::Start(options);
  if (absl::IsInvalidArgument(recovery.status())) return shop::Usage(recovery.status(), kUsage);
  if (!recovery.ok()) return shop::Fail("shop_recovery", recovery.status());
  std::printf("shop_recovery: watching %s in %s\n", options.queue.c_str(), db_path->c_str());
  std::fflush(stdout);

  const std::string signal = outbox::WaitForShutdownSignal();
  (*recovery)->Stop();  // finishes its round, gives the lease up, delivers queued alerts
  std::printf(
      "shop_recovery: %s; republished %ld, publish failures %ld, failed %ld, "
      "deferred %ld\n",
      signal.c_str(), static_cast<long>((*recovery)->republished()),
      static_cast<long>((*recovery)->publish_failures()), static_cast<long>((*recovery)->failed()),
      static_cast<long>((*recovery)->deferred()));
  return 0;
}
