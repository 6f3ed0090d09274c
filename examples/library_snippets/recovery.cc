// Recovery: re-publishes SENDING rows nobody acknowledged in time, with
// backoff; after the last attempt marks them FAILED and raises an alert.
#include "snippets.h"

#include "shared/base/status_macros.h"
#include "shared/roles/recovery.h"

namespace shop {

absl::Status RunRecovery(const Setup& setup, absl::Duration how_long) {
  outbox::Recovery::Options options;
  options.amqp = setup.amqp;
  // The shop's database as the shop made it: recovery never creates it.
  options.db = setup.shop_db;
  options.producer_db = {&ShopSchema(), "the shop", "SHOP_DB", "shop", "shop database"};
  options.queue = kOrders;          // watched, and its reply queue: is the shop away?
  options.signing = setup.signing;  // what it re-publishes is signed as the shop signs
  options.recovery.instance_id = "shop-recovery-1";  // one instance re-publishes at a time
  options.recovery.retry = Retry();                  // the policy the producer stamps on rows
  options.recovery.biz_key_label = "order_id";
  options.recovery.consumer_name = "shipping";
  OUTBOX_ASSIGN_OR_RETURN(auto recovery, outbox::Recovery::Start(options));  // alerts: logged only
  absl::SleepFor(how_long);
  recovery->Stop();  // finishes its round and gives the lease up
  return absl::OkStatus();
}

}  // namespace shop
