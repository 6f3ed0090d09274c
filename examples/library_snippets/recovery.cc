// Recovery as a process of its own (Producer::Start runs it beside the
// producer unless config.recovery_in_process is false): re-publishes SENDING
// rows nobody acknowledged in time, with backoff; after the last attempt
// marks them FAILED and raises an alert.
#include "shared/base/status_macros.h"
#include "snippets.h"

namespace shop {

absl::Status RunRecovery(const Setup& setup, absl::Duration how_long) {
  outbox::Config config = ShopOutbox(setup);
  config.instance_id = "shop-recovery-1";               // one instance re-publishes at a time
  config.recovery.recovery.consumer_name = "shipping";  // what its alerts call the consumer
  OUTBOX_ASSIGN_OR_RETURN(auto recovery, outbox::Recovery::Start(config));
  absl::SleepFor(how_long);  // alerts: logged only, without an alertmanager_url
  recovery->Stop();          // finishes its round and gives the lease up
  return absl::OkStatus();
}

}  // namespace shop
