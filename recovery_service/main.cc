// recovery_service: re-publishes SENDING outbox rows that were not
// acknowledged in time (linear backoff), fails exhausted ones with an alert,
// and serves the operator API (ops.v1.OutboxOps).
#include <unistd.h>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "recovery_service/dead_letters.h"
#include "recovery_service/ops_grpc.h"
#include "recovery_service/recovery_store.h"
#include "recovery_service/recovery_worker.h"
#include "shared/amqp/amqp_transport.h"
#include "shared/base/status_macros.h"
#include "shared/observability/alerts.h"
#include "shared/observability/log.h"
#include "shared/runtime/env.h"
#include "shared/service/service_flags.h"
#include "shared/service/service_main.h"

using outbox::EnvOr;
using outbox::EnvOrDouble;
using outbox::EnvOrDuration;
using outbox::EnvOrInt;
ABSL_FLAG(std::string, runbook_url, EnvOr("RUNBOOK_URL", outbox::kDefaultRunbookBase),
          "where the alert runbooks are; every alert sent to Alertmanager carries the "
          "annotation runbook_url=<this>#<alertname in lower case> [env RUNBOOK_URL]");
ABSL_FLAG(std::string, ops_token_file, EnvOr("OPS_TOKEN_FILE", ""),
          "file holding the operator token; when set every ops.v1.OutboxOps call needs "
          "'authorization: Bearer <token>' (health and reflection stay open) [env OPS_TOKEN_FILE]");

namespace {
std::string DefaultInstanceId() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return absl::StrCat(host, "-", getpid());
}
}  // namespace

ABSL_FLAG(std::string, recovery_listen, EnvOr("RECOVERY_LISTEN", "127.0.0.1:50053"),
          "ops gRPC listen address host:port [env RECOVERY_LISTEN]");
ABSL_FLAG(std::string, payment_db, EnvOr("PAYMENT_DB", "payment.db"),
          "the payment service's SQLite file [env PAYMENT_DB]");
ABSL_FLAG(absl::Duration, payment_db_wait, EnvOrDuration("PAYMENT_DB_WAIT", absl::Seconds(30)),
          "how long to wait for payment_service to create --payment_db, or to upgrade it to "
          "this version's schema; recovery never creates or migrates it [env PAYMENT_DB_WAIT]");
ABSL_FLAG(std::string, metrics_listen, EnvOr("RECOVERY_METRICS_LISTEN", ""),
          "Prometheus /metrics on host:port; empty = off [env RECOVERY_METRICS_LISTEN]");
ABSL_FLAG(int, recovery_batch, EnvOrInt("RECOVERY_BATCH", 200),
          "rows claimed per round [env RECOVERY_BATCH]");
ABSL_FLAG(absl::Duration, recovery_lease_ttl, EnvOrDuration("RECOVERY_LEASE_TTL", absl::Seconds(10)),
          "lease lifetime; another instance takes over this long after a crash "
          "[env RECOVERY_LEASE_TTL]");
ABSL_FLAG(double, recovery_rate, EnvOrDouble("RECOVERY_RATE", 1000),
          "most re-published messages per second [env RECOVERY_RATE]");
ABSL_FLAG(absl::Duration, recovery_idle_sleep, EnvOrDuration("RECOVERY_IDLE_SLEEP", absl::Seconds(1)),
          "sleep when nothing is due [env RECOVERY_IDLE_SLEEP]");
ABSL_FLAG(int, recovery_max_publish_failures, EnvOrInt("RECOVERY_MAX_PUBLISH_FAILURES", 3),
          "failed rounds in a row before the lease is given up [env RECOVERY_MAX_PUBLISH_FAILURES]");
ABSL_FLAG(std::string, recovery_instance_id, EnvOr("RECOVERY_INSTANCE_ID", ""),
          "this instance's name in the lease; empty = <hostname>-<pid> [env RECOVERY_INSTANCE_ID]");
ABSL_FLAG(absl::Duration, backlog_age, EnvOrDuration("RECOVERY_BACKLOG_AGE", absl::Minutes(5)),
          "SENDING rows older than this count towards the backlog [env RECOVERY_BACKLOG_AGE]");
ABSL_FLAG(int64_t, backlog_threshold, EnvOrInt("RECOVERY_BACKLOG_THRESHOLD", 1000),
          "backlog size that raises one alert [env RECOVERY_BACKLOG_THRESHOLD]");
ABSL_FLAG(absl::Duration, housekeeping_every,
          EnvOrDuration("RECOVERY_HOUSEKEEPING_EVERY", absl::Seconds(10)),
          "how often the active instance archives and checks the backlog "
          "[env RECOVERY_HOUSEKEEPING_EVERY]");
ABSL_FLAG(int64_t, recovery_hold_queue_depth, EnvOrInt("RECOVERY_HOLD_QUEUE_DEPTH", 10000),
          "re-publishing holds (no attempts spent) while PAY_QUEUE has more ready messages "
          "than this, or no consumer, until it is down to a tenth of this "
          "[env RECOVERY_HOLD_QUEUE_DEPTH]");
ABSL_FLAG(absl::Duration, alert_resend, EnvOrDuration("RECOVERY_ALERT_RESEND", absl::Minutes(1)),
          "active alerts are sent to Alertmanager again this often (they expire after four "
          "times this if recovery stops) [env RECOVERY_ALERT_RESEND]");
ABSL_FLAG(absl::Duration, retention, EnvOrDuration("RECOVERY_RETENTION", absl::Hours(24 * 7)),
          "SENT rows older than this move to outbox_archive [env RECOVERY_RETENTION]");

namespace outbox::recovery {
namespace {

absl::Status Run() {
  const std::string listen = absl::GetFlag(FLAGS_recovery_listen);
  ASSIGN_OR_RETURN(ServiceConfig config, ServiceConfigFromFlags());
  ASSIGN_OR_RETURN(BearerTokenCheck auth,
                   LoadBearerToken(absl::GetFlag(FLAGS_ops_token_file), "ops_token_file"));
  RecoveryOptions options;
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
  options.housekeeping_every = absl::GetFlag(FLAGS_housekeeping_every);
  options.pay_queue = config.pay_queue;
  if (config.accounting_shards > 1) options.pay_queue_shards = config.payment_event_queues();
  // Dead letters go back to the queue they came from: with accounting
  // shards, to their own shard by its name (docs/deployment.md, Accounting shards).
  options.dead_letter_sources = config.payment_event_queues();
  options.dead_letter_sources.push_back(config.acc_queue);
  options.hold_queue_depth = absl::GetFlag(FLAGS_recovery_hold_queue_depth);
  options.alert_resend = absl::GetFlag(FLAGS_alert_resend);
  RETURN_IF_ERROR(options.Validate());
  const std::string payment_db = absl::GetFlag(FLAGS_payment_db);
  const absl::Duration payment_db_wait = absl::GetFlag(FLAGS_payment_db_wait);
  if (payment_db_wait < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--payment_db_wait must not be negative");
  }

  // The listen addresses last among the checks (they probe this host), and
  // before anything opens a file or a connection.
  RETURN_IF_ERROR(ValidateListenAddress(listen, "recovery_listen"));
  if (!absl::GetFlag(FLAGS_metrics_listen).empty()) {
    RETURN_IF_ERROR(ValidateListenAddress(absl::GetFlag(FLAGS_metrics_listen), "metrics_listen"));
  }

  const Clock& clock = SystemClock::Get();
  MetricsRegistry metrics;
  AlerterOptions alerter_options{config.alertmanager_url, "recovery_service"};
  alerter_options.runbook_base = absl::GetFlag(FLAGS_runbook_url);
  Alerter alerter(std::move(alerter_options));
  // payment_service creates the file and its schema; the two may start in
  // any order, so wait for it rather than create an empty file at a wrong path.
  ASSIGN_OR_RETURN(auto store,
                   RecoveryStore::OpenWhenCreated(
                       payment_db, config.db, payment_db_wait, [&](const absl::Status& why) {
                         LogInfo("waiting_for_payment_db",
                                 {KV("path", payment_db),
                                  KV("wait", absl::FormatDuration(payment_db_wait)),
                                  KV("reason", why.message())});
                       }));
  AmqpPublisher amqp(config.amqp, Topology{{}, "", kPaymentsExchange},
                     absl::StrCat("recovery-", options.instance_id));
  SigningPublisher broker(amqp, config.keys());
  RecoveryWorker worker(*store, broker, alerter, clock, metrics, options);
  std::vector<DeadLetters::Source> dead_letter_sources;
  for (const std::string& queue : config.payment_event_queues()) {
    dead_letter_sources.push_back({queue, kPaymentsExchange});
  }
  dead_letter_sources.push_back({config.acc_queue, kRepliesExchange});
  DeadLetters dead_letters(config.amqp, std::move(dead_letter_sources));
  OutboxOpsImpl ops(*store, worker, alerter, dead_letters, clock, std::move(auth));
  store->RegisterMetrics(metrics, clock);
  alerter.RegisterMetrics(metrics);
  dead_letters.RegisterMetrics(metrics);

  // Ports first: a process that cannot serve (a port in use) exits before it
  // takes the lease or re-publishes anything.
  ASSIGN_OR_RETURN(auto serving, Serving::Start(listen, {&ops},
                                                absl::GetFlag(FLAGS_metrics_listen), metrics,
                                                config.tls));
  worker.Start();
  LogInfo("recovery_service_started",
          {KV("listen", listen), KV("port", serving->port()),
           KV("db", payment_db), KV("instance", options.instance_id),
           KV("amqp", config.amqp.Redacted()),
           KV("message_signing", config.message_signing()),
           KV("base_delay", absl::FormatDuration(options.retry.base_delay)),
           KV("alertmanager", config.alertmanager_url)});
  LogInfo("recovery_service_stopping", {KV("signal", serving->WaitForShutdownSignal())});
  serving->Shutdown();
  worker.Stop();
  alerter.Stop();
  LogInfo("recovery_service_stopped",
          {KV("republished", worker.republished()), KV("failed", worker.failed())});
  return absl::OkStatus();
}

}  // namespace
}  // namespace outbox::recovery

int main(int argc, char** argv) {
  return outbox::RunServiceMain(
      argc, argv, "recovery_service",
      "Re-publishes unacknowledged outbox rows, fails exhausted ones with an alert, serves\n"
      "ops.v1.OutboxOps.",
      outbox::recovery::Run);
}
