#include "recovery_service/recovery_flags.h"

#include <unistd.h>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "service_kit/service_flags.h"
#include "shared/base/status_macros.h"
#include "shared/runtime/internal/env.h"

using outbox::EnvOr;
using outbox::EnvOrDouble;
using outbox::EnvOrDuration;
using outbox::EnvOrInt;

namespace {
// The built-in defaults: RecoveryServiceOptions' (recovery_options.h), the
// worker's being RecoveryOptions'.
const outbox::recovery::RecoveryServiceOptions& Defaults() {
  static const auto* const defaults = new outbox::recovery::RecoveryServiceOptions();
  return *defaults;
}
}  // namespace

ABSL_FLAG(std::string, runbook_url, EnvOr("RUNBOOK_URL", Defaults().runbook_url),
          "where the alert runbooks are; every alert sent to Alertmanager carries the "
          "annotation runbook_url=<this>#<alertname in lower case> [env RUNBOOK_URL]");
ABSL_FLAG(std::string, ops_token_file, EnvOr("OPS_TOKEN_FILE", ""),
          "file holding the operator token; when set every ops.v1.OutboxOps call needs "
          "'authorization: Bearer <token>' (health and reflection stay open) [env OPS_TOKEN_FILE]");
ABSL_FLAG(std::string, recovery_listen, EnvOr("RECOVERY_LISTEN", Defaults().listen),
          "ops gRPC listen address host:port [env RECOVERY_LISTEN]");
ABSL_FLAG(std::string, payment_db, EnvOr("PAYMENT_DB", Defaults().payment_db),
          "the payment service's SQLite file, or a postgresql:// URI of its database (its "
          "password in a passfile, never in the URI) [env PAYMENT_DB]");
ABSL_FLAG(absl::Duration, payment_db_wait,
          EnvOrDuration("PAYMENT_DB_WAIT", Defaults().payment_db_wait),
          "how long to wait for payment_service to create --payment_db (on PostgreSQL: its "
          "outbox tables), or to upgrade it to this version's schema; recovery never creates or "
          "migrates it [env PAYMENT_DB_WAIT]");
ABSL_FLAG(std::string, metrics_listen, EnvOr("RECOVERY_METRICS_LISTEN", ""),
          "Prometheus /metrics on host:port; empty = off [env RECOVERY_METRICS_LISTEN]");
ABSL_FLAG(int, recovery_batch, EnvOrInt("RECOVERY_BATCH", Defaults().worker.batch),
          "rows claimed per round [env RECOVERY_BATCH]");
ABSL_FLAG(absl::Duration, recovery_lease_ttl,
          EnvOrDuration("RECOVERY_LEASE_TTL", Defaults().worker.lease_ttl),
          "lease lifetime; another instance takes over this long after a crash "
          "[env RECOVERY_LEASE_TTL]");
ABSL_FLAG(double, recovery_rate, EnvOrDouble("RECOVERY_RATE", Defaults().worker.rate_per_second),
          "most re-published messages per second [env RECOVERY_RATE]");
ABSL_FLAG(absl::Duration, recovery_idle_sleep,
          EnvOrDuration("RECOVERY_IDLE_SLEEP", Defaults().worker.idle_sleep),
          "sleep when nothing is due [env RECOVERY_IDLE_SLEEP]");
ABSL_FLAG(
    int, recovery_max_publish_failures,
    EnvOrInt("RECOVERY_MAX_PUBLISH_FAILURES", Defaults().worker.max_publish_failures),
    "failed rounds in a row before the lease is given up [env RECOVERY_MAX_PUBLISH_FAILURES]");
ABSL_FLAG(std::string, recovery_instance_id, EnvOr("RECOVERY_INSTANCE_ID", ""),
          "this instance's name in the lease; empty = <hostname>-<pid> [env RECOVERY_INSTANCE_ID]");
ABSL_FLAG(absl::Duration, backlog_age,
          EnvOrDuration("RECOVERY_BACKLOG_AGE", Defaults().worker.backlog_age),
          "SENDING rows older than this count towards the backlog [env RECOVERY_BACKLOG_AGE]");
ABSL_FLAG(int64_t, backlog_threshold,
          EnvOrInt("RECOVERY_BACKLOG_THRESHOLD", Defaults().worker.backlog_threshold),
          "backlog size that raises one alert [env RECOVERY_BACKLOG_THRESHOLD]");
ABSL_FLAG(absl::Duration, housekeeping_every,
          EnvOrDuration("RECOVERY_HOUSEKEEPING_EVERY", Defaults().worker.housekeeping_every),
          "how often the active instance archives and checks the backlog "
          "[env RECOVERY_HOUSEKEEPING_EVERY]");
ABSL_FLAG(int64_t, recovery_hold_queue_depth,
          EnvOrInt("RECOVERY_HOLD_QUEUE_DEPTH", Defaults().worker.hold_queue_depth),
          "re-publishing holds (no attempts spent) while PAY_QUEUE has more ready messages "
          "than this, or no consumer, until it is down to a tenth of this "
          "[env RECOVERY_HOLD_QUEUE_DEPTH]");
ABSL_FLAG(absl::Duration, alert_resend,
          EnvOrDuration("RECOVERY_ALERT_RESEND", Defaults().worker.alert_resend),
          "active alerts are sent to Alertmanager again this often (they expire after four "
          "times this if recovery stops) [env RECOVERY_ALERT_RESEND]");
ABSL_FLAG(absl::Duration, retention,
          EnvOrDuration("RECOVERY_RETENTION", Defaults().worker.retention),
          "SENT rows older than this move to outbox_archive [env RECOVERY_RETENTION]");
ABSL_FLAG(absl::Duration, archive_retention,
          EnvOrDuration("RECOVERY_ARCHIVE_RETENTION", Defaults().worker.archive_retention),
          "archived rows acknowledged longer ago than this are deleted from outbox_archive "
          "(outbox_check counts their payments as pruned); keep it longer than the oldest "
          "accounting.db backup you would restore, since a restore's lost bookings are found "
          "among kept rows only; 0 keeps them all, any other value must be longer than "
          "--retention [env RECOVERY_ARCHIVE_RETENTION]");
ABSL_FLAG(absl::Duration, audit_retention,
          EnvOrDuration("RECOVERY_AUDIT_RETENTION", Defaults().worker.audit_retention),
          "outbox_audit records older than this are deleted; 0 keeps them all "
          "[env RECOVERY_AUDIT_RETENTION]");

namespace outbox::recovery {
namespace {

std::string DefaultInstanceId() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return absl::StrCat(host, "-", getpid());
}

}  // namespace

absl::StatusOr<RecoveryServiceOptions> OptionsFromFlags() {
  RecoveryServiceOptions o;
  o.listen = absl::GetFlag(FLAGS_recovery_listen);
  ASSIGN_OR_RETURN(o.service, ServiceConfigFromFlags());
  ASSIGN_OR_RETURN(o.auth, LoadBearerToken(absl::GetFlag(FLAGS_ops_token_file), "ops_token_file"));
  const ServiceConfig& config = o.service;
  RecoveryOptions& options = o.worker;
  options.instance_id = absl::GetFlag(FLAGS_recovery_instance_id);
  if (options.instance_id.empty()) options.instance_id = DefaultInstanceId();
  options.retry = config.retry;
  options.batch = absl::GetFlag(FLAGS_recovery_batch);
  options.rate_per_second = absl::GetFlag(FLAGS_recovery_rate);
  options.lease_ttl = absl::GetFlag(FLAGS_recovery_lease_ttl);
  options.idle_sleep = absl::GetFlag(FLAGS_recovery_idle_sleep);
  options.max_publish_failures = absl::GetFlag(FLAGS_recovery_max_publish_failures);
  options.backlog_age = absl::GetFlag(FLAGS_backlog_age);
  options.backlog_threshold = absl::GetFlag(FLAGS_backlog_threshold);
  options.retention = absl::GetFlag(FLAGS_retention);
  options.archive_retention = absl::GetFlag(FLAGS_archive_retention);
  options.audit_retention = absl::GetFlag(FLAGS_audit_retention);
  options.housekeeping_every = absl::GetFlag(FLAGS_housekeeping_every);
  options.watched_queues = config.payment_event_queues();
  options.watched_label = config.pay_queue;
  options.biz_key_label = "payment_id";
  options.consumer_name = "accounting";
  // Dead letters go back to the queue they came from: with accounting
  // shards, to their own shard by its name (docs/deployment.md, Accounting shards).
  options.dead_letter_sources = config.payment_event_queues();
  options.dead_letter_sources.push_back(config.acc_queue);
  options.reply_queues = {config.acc_queue};  // payment's: with it away, recovery sends
  options.hold_queue_depth = absl::GetFlag(FLAGS_recovery_hold_queue_depth);
  options.alert_resend = absl::GetFlag(FLAGS_alert_resend);
  o.payment_db = absl::GetFlag(FLAGS_payment_db);
  o.payment_db_wait = absl::GetFlag(FLAGS_payment_db_wait);
  o.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  o.runbook_url = absl::GetFlag(FLAGS_runbook_url);
  return o;
}

}  // namespace outbox::recovery
