#include "recovery_service/recovery_wiring.h"

#include "recovery_service/ops_grpc.h"
#include "service_kit/payment_db_schema.h"
#include "service_kit/service_main.h"
#include "service_kit/topology.h"
#include "shared/base/status_macros.h"
#include "shared/observability/log.h"
#include "shared/postgres/pg_connection.h"
#include "shared/postgres/pg_recovery.h"
#include "shared/roles/recovery.h"

namespace outbox::recovery {

namespace {

// --payment_db as logs show it: a connection string without its password.
std::string DbForLogs(const std::string& payment_db) {
  return IsPgConninfo(payment_db) ? RedactConninfo(payment_db) : payment_db;
}

// The recovery role on payment_service's database, a SQLite file or a
// PostgreSQL database (--payment_db a libpq URI): it waits for
// payment_service to create it (the two may start in any order) rather than
// create an empty file at a wrong path or tables in a wrong database. Re-publishing goes through
// the payments exchange; the dead letters of each payment event queue go back through it, those of
// the reply queue through the replies exchange.
Recovery::Options RecoveryOptionsOf(const RecoveryServiceOptions& service_options,
                                    MetricsRegistry& metrics) {
  const ServiceConfig& config = service_options.service;
  Recovery::Options recovery;
  recovery.amqp = config.amqp;
  recovery.db = service_options.payment_db;
  recovery.producer_db = PaymentProducerDb();
  recovery.db_options = config.db;
  recovery.wait_for_db = service_options.payment_db_wait;
  recovery.on_wait = [path = DbForLogs(service_options.payment_db),
                      wait = service_options.payment_db_wait](const absl::Status& why) {
    LogInfo("waiting_for_payment_db", {KV("path", path), KV("wait", absl::FormatDuration(wait)),
                                       KV("reason", why.message())});
  };
  recovery.signing = config.keys() != nullptr ? Signing::With(*config.keys()) : Signing::Unsigned();
  recovery.recovery = service_options.worker;
  for (const std::string& queue : config.payment_event_queues()) {
    recovery.redrive_exchanges[queue] = kPaymentsExchange;
  }
  recovery.redrive_exchanges[config.acc_queue] = kRepliesExchange;
  recovery.topology = Topology{{}, "", kPaymentsExchange};
  recovery.alerts = AlerterOptions{config.alertmanager_url, "recovery_service"};
  recovery.alerts.runbook_base = service_options.runbook_url;
  recovery.name = "recovery";  // the connection "recovery-<instance>"
  recovery.dead_letters_name = "recovery-dead-letters";
  recovery.start_workers = false;  // once serving
  recovery.clock = &SystemClock::Get();
  recovery.metrics = &metrics;
  return recovery;
}

// A retention as the start-up line shows it: zero keeps every row.
std::string Kept(absl::Duration retention) {
  return retention > absl::ZeroDuration() ? absl::FormatDuration(retention) : "forever";
}

// Starts the worker, serves until SIGTERM or SIGINT, then stops.
void ServeUntilSignal(const RecoveryServiceOptions& service_options, Serving& serving,
                      Recovery& recovery) {
  const ServiceConfig& config = service_options.service;
  const RecoveryOptions& options = service_options.worker;
  recovery.StartWorkers();
  LogInfo("recovery_service_started",
          {KV("listen", service_options.listen), KV("port", serving.port()),
           KV("db", DbForLogs(service_options.payment_db)), KV("instance", options.instance_id),
           KV("amqp", config.amqp.Redacted()), KV("message_signing", config.message_signing()),
           KV("base_delay", absl::FormatDuration(options.retry.base_delay)),
           KV("alertmanager", config.alertmanager_url),
           KV("retention", absl::FormatDuration(options.retention)),
           KV("archive_retention", Kept(options.archive_retention)),
           KV("audit_retention", Kept(options.audit_retention))});
  LogInfo("recovery_service_stopping", {KV("signal", serving.WaitForShutdownSignal())});
  serving.Shutdown();
  recovery.Stop();  // the loop gives the lease up, then the alerter delivers what is queued
  LogInfo("recovery_service_stopped",
          {KV("republished", recovery.republished()), KV("failed", recovery.failed())});
}

}  // namespace

absl::Status RunRecoveryService(const RecoveryServiceOptions& service_options) {
  const std::string& listen = service_options.listen;
  const ServiceConfig& config = service_options.service;

  // The listen addresses last among the checks (they probe this host), and
  // before anything opens a file or a connection.
  RETURN_IF_ERROR(ValidateListenAddress(listen, "recovery_listen"));
  if (!service_options.metrics_listen.empty()) {
    RETURN_IF_ERROR(ValidateListenAddress(service_options.metrics_listen, "metrics_listen"));
  }

  MetricsRegistry metrics;
  Recovery::Options recovery_options = RecoveryOptionsOf(service_options, metrics);
  ASSIGN_OR_RETURN(auto recovery, IsPgConninfo(service_options.payment_db)
                                      ? StartPgRecovery(std::move(recovery_options))
                                      : Recovery::Start(std::move(recovery_options)));
  OutboxOpsImpl ops(recovery->repository(), *recovery->operator_store(), recovery->loop(),
                    *recovery->alerter(), *recovery->dead_letters(), SystemClock::Get(),
                    service_options.auth, service_options.worker.retry);

  // Ports first: a process that cannot serve (a port in use) exits before it
  // takes the lease or re-publishes anything.
  ASSIGN_OR_RETURN(auto serving,
                   Serving::Start(listen, {{&ops, service_options.auth}},
                                  service_options.metrics_listen, metrics, config.tls));
  ServeUntilSignal(service_options, *serving, *recovery);
  return absl::OkStatus();
}

}  // namespace outbox::recovery
