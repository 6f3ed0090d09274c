// accounting_service: consumes PAY_QUEUE idempotently (voucher + processed
// message id in one transaction) and replies on ACC_QUEUE, duplicates included.
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "accounting_service/accounting_grpc.h"
#include "accounting_service/payment_consumer.h"
#include "accounting_service/voucher_store.h"
#include "shared/alerts.h"
#include "shared/cli.h"
#include "shared/env.h"
#include "shared/grpc_server.h"
#include "shared/grpc_util.h"
#include "shared/ids.h"
#include "shared/log.h"
#include "shared/metrics_server.h"
#include "shared/status_macros.h"

using outbox::EnvOr;
using outbox::EnvOrInt;

ABSL_FLAG(std::string, accounting_listen, EnvOr("ACCOUNTING_LISTEN", "127.0.0.1:50052"),
          "gRPC listen address host:port [env ACCOUNTING_LISTEN]");
ABSL_FLAG(std::string, accounting_db, EnvOr("ACCOUNTING_DB", "accounting.db"),
          "SQLite file holding vouchers and processed message ids [env ACCOUNTING_DB]");
ABSL_FLAG(std::string, amqp_url, EnvOr("AMQP_URL", ""),
          "RabbitMQ URL amqp://user:pass@host:port/vhost, required [env AMQP_URL]");
ABSL_FLAG(std::string, pay_queue, EnvOr("PAY_QUEUE", "PAY_QUEUE"),
          "queue the payment events come from [env PAY_QUEUE]");
ABSL_FLAG(std::string, acc_queue, EnvOr("ACC_QUEUE", "ACC_QUEUE"),
          "queue replies go to when a message has no reply_to [env ACC_QUEUE]");
ABSL_FLAG(std::string, queue_type, EnvOr("QUEUE_TYPE", ""),
          "x-queue-type of declared queues, e.g. quorum; empty = classic [env QUEUE_TYPE]");
ABSL_FLAG(std::string, alertmanager_url, EnvOr("ALERTMANAGER_URL", ""),
          "Alertmanager base URL for dead-letter alerts, e.g. http://127.0.0.1:9093; empty = "
          "alerts only logged [env ALERTMANAGER_URL]");
ABSL_FLAG(std::string, metrics_listen, EnvOr("ACCOUNTING_METRICS_LISTEN", ""),
          "Prometheus /metrics on host:port; empty = off [env ACCOUNTING_METRICS_LISTEN]");
ABSL_FLAG(std::string, sqlite_synchronous, EnvOr("SQLITE_SYNCHRONOUS", "full"),
          "SQLite durability: full, normal or off [env SQLITE_SYNCHRONOUS]");
ABSL_FLAG(int, prefetch, EnvOrInt("AMQP_PREFETCH", 256),
          "PAY_QUEUE prefetch, also the largest batch applied in one transaction "
          "[env AMQP_PREFETCH]");

namespace outbox::accounting {
namespace {

absl::Status Run() {
  const std::string listen = absl::GetFlag(FLAGS_accounting_listen);
  RETURN_IF_ERROR(ValidateListenAddress(listen, "accounting_listen"));
  if (absl::GetFlag(FLAGS_amqp_url).empty()) {
    return absl::InvalidArgumentError("--amqp_url (or AMQP_URL) is required");
  }
  ASSIGN_OR_RETURN(AmqpUrl url, AmqpUrl::Parse(absl::GetFlag(FLAGS_amqp_url)));
  ASSIGN_OR_RETURN(Durability durability, ParseDurability(absl::GetFlag(FLAGS_sqlite_synchronous)));
  const int prefetch = absl::GetFlag(FLAGS_prefetch);
  if (prefetch < 1 || prefetch > 65535) {
    return absl::InvalidArgumentError("--prefetch must be 1..65535");
  }
  Topology topology;
  topology.pay_queue = absl::GetFlag(FLAGS_pay_queue);
  topology.acc_queue = absl::GetFlag(FLAGS_acc_queue);
  topology.queue_type = absl::GetFlag(FLAGS_queue_type);

  const Clock& clock = SystemClock::Get();
  UuidGenerator ids;
  DbOptions db_options;
  db_options.durability = durability;
  ASSIGN_OR_RETURN(auto store, VoucherStore::Open(absl::GetFlag(FLAGS_accounting_db), db_options,
                                                  ids, clock));
  ConsumerOptions consumer_options;
  consumer_options.prefetch = prefetch;
  AlerterOptions alert_options;
  alert_options.alertmanager_url = absl::GetFlag(FLAGS_alertmanager_url);
  alert_options.service = "accounting_service";
  Alerter alerter(alert_options);
  PaymentConsumer consumer(*store, alerter, clock, url, topology, consumer_options);
  consumer.Start();

  std::unique_ptr<MetricsServer> metrics;
  if (!absl::GetFlag(FLAGS_metrics_listen).empty()) {
    ASSIGN_OR_RETURN(metrics, MetricsServer::Start(absl::GetFlag(FLAGS_metrics_listen), [&] {
      const ConsumerStats& s = consumer.stats();
      return absl::StrCat(
          MetricHeader("outbox_vouchers_created_total", "counter", "vouchers booked"),
          MetricLine("outbox_vouchers_created_total", s.applied.load()),
          MetricHeader("outbox_duplicates_total", "counter", "messages seen before, replied again"),
          MetricLine("outbox_duplicates_total", s.duplicates.load()),
          MetricHeader("outbox_dead_lettered_total", "counter", "invalid messages dead-lettered"),
          MetricLine("outbox_dead_lettered_total", s.dead_lettered.load(),
                     absl::StrCat("queue=\"", topology.pay_queue, "\"")),
          MetricHeader("outbox_requeued_total", "counter", "deliveries returned after a failure"),
          MetricLine("outbox_requeued_total", s.requeued.load()));
    }));
  }

  AccountingServiceImpl service(*store);
  int port = 0;
  ASSIGN_OR_RETURN(auto server, StartGrpcServer(listen, {&service}, &port));
  LogInfo("accounting_service_started",
          {KV("listen", listen), KV("port", port), KV("db", absl::GetFlag(FLAGS_accounting_db)),
           KV("amqp", url.Redacted())});

  const std::string signal = WaitForShutdownSignal();
  LogInfo("accounting_service_stopping", {KV("signal", signal)});
  ShutdownGrpcServer(*server);
  LogInfo("grpc_server_stopped");
  metrics.reset();
  consumer.Stop();
  alerter.Stop();
  const ConsumerStats& s = consumer.stats();
  LogInfo("accounting_service_stopped",
          {KV("applied", s.applied.load()), KV("duplicates", s.duplicates.load()),
           KV("dead_lettered", s.dead_lettered.load())});
  return absl::OkStatus();
}

}  // namespace
}  // namespace outbox::accounting

int main(int argc, char** argv) {
  outbox::BlockShutdownSignals();
  outbox::InitCommandLine(
      "accounting_service: books one voucher per payment from PAY_QUEUE.\n"
      "Every flag defaults from the environment variable named in its help.");
  absl::ParseCommandLine(argc, argv);
  absl::Status s = outbox::accounting::Run();
  if (!s.ok()) {
    outbox::LogError("accounting_service_failed", {outbox::KV("error", s.ToString())});
    return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}
