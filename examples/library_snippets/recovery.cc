// Recovery: re-publishes SENDING rows nobody acknowledged in time, with
// backoff; after the last attempt marks them FAILED and raises an alert.
#include "snippets.h"

#include "shared/amqp/amqp_transport.h"
#include "shared/base/status_macros.h"
#include "shared/observability/alerts.h"
#include "shared/outbox/recovery_loop.h"
#include "shared/sqlite/recovery_store.h"

namespace shop {

absl::Status RunRecovery(const Setup& setup, absl::Duration how_long) {
  const outbox::Clock& clock = outbox::SystemClock::Get();
  outbox::MetricsRegistry metrics;
  // The shop's database as the shop made it: recovery never creates it.
  const outbox::ProducerDb shop_db{&ShopSchema(), "the shop", "SHOP_DB", "shop", "shop database"};
  ASSIGN_OR_RETURN(auto store, outbox::RecoveryStore::OpenWhenCreated(setup.shop_db, {}, shop_db,
                                                                      absl::Minutes(1), nullptr));

  outbox::AmqpPublisher publisher(setup.amqp, outbox::Topology{}, "shop-recovery");
  outbox::Alerter alerts(outbox::AlerterOptions{});  // logs only; set alertmanager_url to send
  outbox::RecoveryOptions options;
  options.instance_id = "shop-recovery-1";  // lease holder: one instance re-publishes at a time
  options.retry = Retry();                  // the same policy the producer stamps on rows
  options.watched_queues = {kOrders};
  options.dead_letter_sources = {kOrders, kReplies};
  options.reply_queues = {kReplies};  // the producer's: while it is away, recovery sends
  options.biz_key_label = "order_id";
  options.consumer_name = "shipping";
  RETURN_IF_ERROR(options.Validate());

  outbox::RecoveryLoop recovery(*store, publisher, alerts, clock, metrics, options);
  recovery.Start();
  absl::SleepFor(how_long);
  recovery.Stop();  // finishes its round and gives the lease up
  alerts.Stop();
  return absl::OkStatus();
}

}  // namespace shop
