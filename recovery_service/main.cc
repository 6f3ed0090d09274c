// recovery_service: re-publishes SENDING outbox rows that were not
// acknowledged in time (linear backoff), fails exhausted ones with an alert,
// and serves the operator API (ops.v1.OutboxOps).
#include <unistd.h>

#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "recovery_service/dead_letters.h"
#include "recovery_service/ops_grpc.h"
#include "recovery_service/recovery_store.h"
#include "recovery_service/recovery_worker.h"
#include "shared/alerts.h"
#include "shared/cli.h"
#include "shared/env.h"
#include "shared/grpc_server.h"
#include "shared/grpc_util.h"
#include "shared/log.h"
#include "shared/metrics_server.h"
#include "shared/status_macros.h"

using outbox::EnvOr;
using outbox::EnvOrDouble;
using outbox::EnvOrDuration;
using outbox::EnvOrInt;

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
ABSL_FLAG(std::string, amqp_url, EnvOr("AMQP_URL", ""),
          "RabbitMQ URL amqp://user:pass@host:port/vhost, required [env AMQP_URL]");
ABSL_FLAG(std::string, pay_queue, EnvOr("PAY_QUEUE", "PAY_QUEUE"), "[env PAY_QUEUE]");
ABSL_FLAG(std::string, acc_queue, EnvOr("ACC_QUEUE", "ACC_QUEUE"),
          "reply_to of re-published messages [env ACC_QUEUE]");
ABSL_FLAG(std::string, queue_type, EnvOr("QUEUE_TYPE", ""), "x-queue-type [env QUEUE_TYPE]");
ABSL_FLAG(std::string, metrics_listen, EnvOr("RECOVERY_METRICS_LISTEN", ""),
          "Prometheus /metrics on host:port; empty = off [env RECOVERY_METRICS_LISTEN]");
ABSL_FLAG(std::string, sqlite_synchronous, EnvOr("SQLITE_SYNCHRONOUS", "full"),
          "SQLite durability: full, normal or off [env SQLITE_SYNCHRONOUS]");
ABSL_FLAG(absl::Duration, recovery_base_delay, EnvOrDuration("RECOVERY_BASE_DELAY", absl::Seconds(5)),
          "linear backoff unit: the wait after attempt n is base*n [env RECOVERY_BASE_DELAY]");
ABSL_FLAG(absl::Duration, recovery_max_delay, EnvOrDuration("RECOVERY_MAX_DELAY", absl::Minutes(5)),
          "cap of the backoff [env RECOVERY_MAX_DELAY]");
ABSL_FLAG(int, recovery_max_attempts, EnvOrInt("RECOVERY_MAX_ATTEMPTS", 10),
          "publishes before a row becomes FAILED [env RECOVERY_MAX_ATTEMPTS]");
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
ABSL_FLAG(std::string, recovery_instance_id, EnvOr("RECOVERY_INSTANCE_ID", DefaultInstanceId()),
          "this instance's name in the lease [env RECOVERY_INSTANCE_ID]");
ABSL_FLAG(std::string, alertmanager_url, EnvOr("ALERTMANAGER_URL", ""),
          "Alertmanager base URL, e.g. http://127.0.0.1:9093; empty = alerts only logged "
          "[env ALERTMANAGER_URL]");
ABSL_FLAG(absl::Duration, backlog_age, EnvOrDuration("RECOVERY_BACKLOG_AGE", absl::Minutes(5)),
          "SENDING rows older than this count towards the backlog [env RECOVERY_BACKLOG_AGE]");
ABSL_FLAG(int64_t, backlog_threshold, EnvOrInt("RECOVERY_BACKLOG_THRESHOLD", 1000),
          "backlog size that raises one alert [env RECOVERY_BACKLOG_THRESHOLD]");
ABSL_FLAG(absl::Duration, housekeeping_every,
          EnvOrDuration("RECOVERY_HOUSEKEEPING_EVERY", absl::Seconds(10)),
          "how often the active instance archives and checks the backlog "
          "[env RECOVERY_HOUSEKEEPING_EVERY]");
ABSL_FLAG(absl::Duration, retention, EnvOrDuration("RECOVERY_RETENTION", absl::Hours(24 * 7)),
          "SENT rows older than this move to outbox_archive [env RECOVERY_RETENTION]");

namespace outbox::recovery {
namespace {

absl::Status Run() {
  const std::string listen = absl::GetFlag(FLAGS_recovery_listen);
  RETURN_IF_ERROR(ValidateListenAddress(listen, "recovery_listen"));
  if (absl::GetFlag(FLAGS_amqp_url).empty()) {
    return absl::InvalidArgumentError("--amqp_url (or AMQP_URL) is required");
  }
  ASSIGN_OR_RETURN(AmqpUrl url, AmqpUrl::Parse(absl::GetFlag(FLAGS_amqp_url)));
  ASSIGN_OR_RETURN(Durability durability, ParseDurability(absl::GetFlag(FLAGS_sqlite_synchronous)));
  RecoveryOptions options;
  options.instance_id = absl::GetFlag(FLAGS_recovery_instance_id);
  options.policy.backoff.base = absl::GetFlag(FLAGS_recovery_base_delay);
  options.policy.backoff.max = absl::GetFlag(FLAGS_recovery_max_delay);
  options.policy.max_attempts = absl::GetFlag(FLAGS_recovery_max_attempts);
  options.batch = absl::GetFlag(FLAGS_recovery_batch);
  options.rate_per_second = absl::GetFlag(FLAGS_recovery_rate);
  options.lease_ttl = absl::GetFlag(FLAGS_recovery_lease_ttl);
  options.idle_sleep = absl::GetFlag(FLAGS_recovery_idle_sleep);
  options.max_publish_failures = absl::GetFlag(FLAGS_recovery_max_publish_failures);
  options.backlog_age = absl::GetFlag(FLAGS_backlog_age);
  options.backlog_threshold = absl::GetFlag(FLAGS_backlog_threshold);
  options.retention = absl::GetFlag(FLAGS_retention);
  options.housekeeping_every = absl::GetFlag(FLAGS_housekeeping_every);
  options.reply_to = absl::GetFlag(FLAGS_acc_queue);
  if (options.policy.backoff.base <= absl::ZeroDuration() ||
      options.policy.backoff.max < options.policy.backoff.base || options.policy.max_attempts < 1 ||
      options.batch < 1 || options.rate_per_second <= 0 || options.lease_ttl <= absl::ZeroDuration() ||
      options.max_publish_failures < 1 || options.instance_id.empty()) {
    return absl::InvalidArgumentError(
        "need recovery_base_delay > 0, recovery_max_delay >= base, recovery_max_attempts >= 1, "
        "recovery_batch >= 1, recovery_rate > 0, recovery_lease_ttl > 0, "
        "recovery_max_publish_failures >= 1 and a non-empty recovery_instance_id");
  }
  Topology topology;
  topology.pay_queue = absl::GetFlag(FLAGS_pay_queue);
  topology.acc_queue = absl::GetFlag(FLAGS_acc_queue);
  topology.queue_type = absl::GetFlag(FLAGS_queue_type);

  DbOptions db_options;
  db_options.durability = durability;
  ASSIGN_OR_RETURN(auto store, RecoveryStore::Open(absl::GetFlag(FLAGS_payment_db), db_options));
  const Clock& clock = SystemClock::Get();
  AlerterOptions alert_options;
  alert_options.alertmanager_url = absl::GetFlag(FLAGS_alertmanager_url);
  alert_options.service = "recovery_service";
  Alerter alerter(alert_options);
  RecoveryWorker worker(*store, alerter, clock, url, topology, options);
  DeadLetters dead_letters(url, topology);
  worker.Start();

  std::unique_ptr<MetricsServer> metrics;
  if (!absl::GetFlag(FLAGS_metrics_listen).empty()) {
    ASSIGN_OR_RETURN(metrics, MetricsServer::Start(absl::GetFlag(FLAGS_metrics_listen), [&] {
      const RecoveryStats& s = worker.stats();
      std::string out = absl::StrCat(
          MetricHeader("outbox_republished_total", "counter", "messages re-published"),
          MetricLine("outbox_republished_total", s.republished.load()),
          MetricHeader("outbox_republish_failures_total", "counter", "re-publishes not confirmed"),
          MetricLine("outbox_republish_failures_total", s.publish_failures.load()),
          MetricHeader("outbox_failed_total", "counter", "rows this instance turned FAILED"),
          MetricLine("outbox_failed_total", s.failed.load()),
          MetricHeader("outbox_lease_held", "gauge", "1 when this instance is the active one"),
          MetricLine("outbox_lease_held", s.lease_held.load()),
          MetricHeader("outbox_alerts_total", "counter", "alerts by delivery result"),
          MetricLine("outbox_alerts_total", alerter.delivered(), "result=\"delivered\""),
          MetricLine("outbox_alerts_total", alerter.delivery_failures(), "result=\"failed\""));
      if (auto c = store->Counts(); c.ok()) {
        absl::StrAppend(&out, MetricHeader("outbox_rows", "gauge", "outbox rows by status"),
                        MetricLine("outbox_rows", c->sending, "status=\"SENDING\""),
                        MetricLine("outbox_rows", c->sent, "status=\"SENT\""),
                        MetricLine("outbox_rows", c->failed, "status=\"FAILED\""),
                        MetricLine("outbox_rows", c->archived, "status=\"ARCHIVED\""));
      }
      return out;
    }));
  }

  OutboxOpsImpl ops(*store, worker, alerter, dead_letters, clock);
  int port = 0;
  ASSIGN_OR_RETURN(auto server, StartGrpcServer(listen, {&ops}, &port));
  LogInfo("recovery_service_started",
          {KV("listen", listen), KV("port", port), KV("db", absl::GetFlag(FLAGS_payment_db)),
           KV("instance", options.instance_id), KV("amqp", url.Redacted()),
           KV("base_delay", absl::FormatDuration(options.policy.backoff.base)),
           KV("max_attempts", options.policy.max_attempts),
           KV("alertmanager", alert_options.alertmanager_url)});

  const std::string signal = WaitForShutdownSignal();
  LogInfo("recovery_service_stopping", {KV("signal", signal)});
  ShutdownGrpcServer(*server);
  metrics.reset();
  worker.Stop();
  alerter.Stop();
  LogInfo("recovery_service_stopped", {KV("republished", worker.stats().republished.load()),
                                       KV("failed", worker.stats().failed.load())});
  return absl::OkStatus();
}

}  // namespace
}  // namespace outbox::recovery

int main(int argc, char** argv) {
  outbox::BlockShutdownSignals();
  outbox::InitCommandLine(
      "recovery_service: re-publishes unacknowledged outbox rows, fails exhausted ones with an "
      "alert, serves ops.v1.OutboxOps.\nEvery flag defaults from the environment variable named "
      "in its help.");
  absl::ParseCommandLine(argc, argv);
  absl::Status s = outbox::recovery::Run();
  if (!s.ok()) {
    outbox::LogError("recovery_service_failed", {outbox::KV("error", s.ToString())});
    return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}
