// Recovery as a process of its own, for a producer started with
// config.recovery_in_process = false (Producer::Start runs it beside the
// producer otherwise): re-publishes SENDING rows nobody acknowledged in time,
// with backoff; after the last attempt marks them FAILED and raises an alert.
#include "shared/base/status_macros.h"
#include "snippets.h"

namespace shop {

absl::Status RunRecovery(const outbox::Config& shop, absl::Duration how_long) {
  OUTBOX_ASSIGN_OR_RETURN(auto recovery, outbox::Recovery::Start(shop));
  absl::SleepFor(how_long);  // alerts: logged only, without an alertmanager_url
  recovery->Stop();          // finishes its round and gives the lease up
  return absl::OkStatus();
}

}  // namespace shop
