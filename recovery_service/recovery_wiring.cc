#include "recovery_service/recovery_wiring.h"

#include "absl/strings/str_cat.h"
#include "recovery_service/ops_grpc.h"
#include "service_kit/payment_db_schema.h"
#include "service_kit/service_main.h"
#include "service_kit/topology.h"
#include "shared/amqp/amqp_transport.h"
#include "shared/base/status_macros.h"
#include "shared/observability/alerts.h"
#include "shared/observability/log.h"
#include "shared/outbox/dead_letter_sweep.h"
#include "shared/outbox/dead_letters.h"
#include "shared/outbox/recovery_loop.h"
#include "shared/sqlite/recovery_store.h"

namespace outbox::recovery {

namespace {

AlerterOptions AlerterOptionsOf(const RecoveryServiceOptions& service_options) {
  AlerterOptions alerter_options{service_options.service.alertmanager_url, "recovery_service"};
  alerter_options.runbook_base = service_options.runbook_url;
  return alerter_options;
}

// payment_service creates the file and its schema; the two may start in
// any order, so wait for it rather than create an empty file at a wrong path.
absl::StatusOr<std::unique_ptr<RecoveryStore>> OpenStoreWhenCreated(
    const RecoveryServiceOptions& service_options) {
  const std::string& payment_db = service_options.payment_db;
  const absl::Duration payment_db_wait = service_options.payment_db_wait;
  return RecoveryStore::OpenWhenCreated(
      payment_db, service_options.service.db, PaymentProducerDb(), payment_db_wait,
      [&](const absl::Status& why) {
        LogInfo("waiting_for_payment_db",
                {KV("path", payment_db), KV("wait", absl::FormatDuration(payment_db_wait)),
                 KV("reason", why.message())});
      });
}

// The queues whose dead letters the ops API may move back: each payment
// event queue (fed by the payments exchange) and the reply queue.
std::vector<DeadLetters::Source> DeadLetterSources(const ServiceConfig& config) {
  std::vector<DeadLetters::Source> dead_letter_sources;
  for (const std::string& queue : config.payment_event_queues()) {
    dead_letter_sources.push_back({queue, kPaymentsExchange});
  }
  dead_letter_sources.push_back({config.acc_queue, kRepliesExchange});
  return dead_letter_sources;
}

// A retention as the start-up line shows it: zero keeps every row.
std::string Kept(absl::Duration retention) {
  return retention > absl::ZeroDuration() ? absl::FormatDuration(retention) : "forever";
}

// Starts the worker, serves until SIGTERM or SIGINT, then stops.
void ServeUntilSignal(const RecoveryServiceOptions& service_options, Serving& serving,
                      RecoveryLoop& worker, Alerter& alerter) {
  const ServiceConfig& config = service_options.service;
  const RecoveryOptions& options = service_options.worker;
  worker.Start();
  LogInfo("recovery_service_started",
          {KV("listen", service_options.listen), KV("port", serving.port()),
           KV("db", service_options.payment_db), KV("instance", options.instance_id),
           KV("amqp", config.amqp.Redacted()), KV("message_signing", config.message_signing()),
           KV("base_delay", absl::FormatDuration(options.retry.base_delay)),
           KV("alertmanager", config.alertmanager_url),
           KV("retention", absl::FormatDuration(options.retention)),
           KV("archive_retention", Kept(options.archive_retention)),
           KV("audit_retention", Kept(options.audit_retention))});
  LogInfo("recovery_service_stopping", {KV("signal", serving.WaitForShutdownSignal())});
  serving.Shutdown();
  worker.Stop();
  alerter.Stop();
  LogInfo("recovery_service_stopped",
          {KV("republished", worker.republished()), KV("failed", worker.failed())});
}

}  // namespace

absl::Status RunRecoveryService(const RecoveryServiceOptions& service_options) {
  const std::string& listen = service_options.listen;
  const ServiceConfig& config = service_options.service;
  const RecoveryOptions& options = service_options.worker;

  // The listen addresses last among the checks (they probe this host), and
  // before anything opens a file or a connection.
  RETURN_IF_ERROR(ValidateListenAddress(listen, "recovery_listen"));
  if (!service_options.metrics_listen.empty()) {
    RETURN_IF_ERROR(ValidateListenAddress(service_options.metrics_listen, "metrics_listen"));
  }

  const Clock& clock = SystemClock::Get();
  MetricsRegistry metrics;
  Alerter alerter(AlerterOptionsOf(service_options));
  ASSIGN_OR_RETURN(auto store, OpenStoreWhenCreated(service_options));
  store->set_instance(options.instance_id);
  AmqpPublisher amqp(config.amqp, Topology{{}, "", kPaymentsExchange},
                     absl::StrCat("recovery-", options.instance_id));
  SigningPublisher broker(amqp, config.keys());
  RecoveryLoop worker(*store, broker, alerter, clock, metrics, options);
  std::vector<DeadLetters::Source> dead_letter_sources = DeadLetterSources(config);
  AmqpQueueBrowser dead_letter_broker(config.amqp, "recovery-dead-letters");
  std::vector<std::string> swept;
  for (const DeadLetters::Source& s : dead_letter_sources) swept.push_back(s.queue);
  DeadLetters dead_letters(dead_letter_broker, std::move(dead_letter_sources));
  // Opened by the first housekeeping pass or operator call, then idle in
  // between: kept alive, not dropped by the broker for missed heartbeats.
  dead_letters.KeepAlive(config.amqp.heartbeat);
  // Copies whose message was booked since (re-driven from its row) leave the
  // dead-letter queues with the lease holder's housekeeping.
  DeadLetterSweep sweep(
      dead_letters, config.keys(), *store,
      [&store](const std::string& message_id, int64_t at) {
        store->RecordSettledDeadLetterRemoved(message_id, at).IgnoreError();  // logged
      },
      clock, metrics, {std::move(swept)});
  worker.AddHousekeeping([&sweep] { sweep.Run(); });
  OutboxOpsImpl ops(*store, worker, alerter, dead_letters, clock, service_options.auth,
                    options.retry);
  store->RegisterMetrics(metrics, clock);
  alerter.RegisterMetrics(metrics);
  dead_letters.RegisterMetrics(metrics);

  // Ports first: a process that cannot serve (a port in use) exits before it
  // takes the lease or re-publishes anything.
  ASSIGN_OR_RETURN(auto serving,
                   Serving::Start(listen, {{&ops, service_options.auth}},
                                  service_options.metrics_listen, metrics, config.tls));
  ServeUntilSignal(service_options, *serving, worker, alerter);
  return absl::OkStatus();
}

}  // namespace outbox::recovery
