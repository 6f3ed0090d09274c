// Recovery as a process of its own on PostgreSQL, for a producer started
// with config.recovery_in_process = false (PgProducer::Start runs it beside
// the producer otherwise): it opens the producer's database once the
// producer has made its tables, and never creates or upgrades them.
#include "shared/base/status_macros.h"
#include "shared/postgres/pg_recovery.h"
#include "snippets.h"

namespace shop {

absl::Status RunRecovery(const outbox::Config& shop, absl::Duration how_long) {
  OUTBOX_ASSIGN_OR_RETURN(auto recovery, outbox::StartPgRecovery(outbox::RecoveryOptionsOf(shop)));
  absl::SleepFor(how_long);  // alerts: logged only, without an alertmanager_url
  recovery->Stop();          // finishes its round and gives the lease up
  return absl::OkStatus();
}

}  // namespace shop
