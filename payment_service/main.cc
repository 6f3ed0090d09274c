// payment_service: CreatePayment writes a payment and its outbox row in one
// SQLite transaction, publishes to PAY_QUEUE right after the commit, and marks
// the row SENT when accounting's reply arrives on ACC_QUEUE.
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "payment_service/ack_listener.h"
#include "payment_service/fast_publisher.h"
#include "payment_service/payment_grpc.h"
#include "payment_service/payment_store.h"
#include "payment_service/payment_writer.h"
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
using outbox::EnvOrDuration;
using outbox::EnvOrInt;

ABSL_FLAG(std::string, payment_listen, EnvOr("PAYMENT_LISTEN", "127.0.0.1:50051"),
          "gRPC listen address host:port [env PAYMENT_LISTEN]");
ABSL_FLAG(std::string, payment_db, EnvOr("PAYMENT_DB", "payment.db"),
          "SQLite file holding payments and the outbox [env PAYMENT_DB]");
ABSL_FLAG(std::string, amqp_url, EnvOr("AMQP_URL", ""),
          "RabbitMQ URL amqp://user:pass@host:port/vhost, required [env AMQP_URL]");
ABSL_FLAG(std::string, pay_queue, EnvOr("PAY_QUEUE", "PAY_QUEUE"),
          "queue the payment events go to [env PAY_QUEUE]");
ABSL_FLAG(std::string, acc_queue, EnvOr("ACC_QUEUE", "ACC_QUEUE"),
          "queue accounting's acknowledgements come from [env ACC_QUEUE]");
ABSL_FLAG(std::string, queue_type, EnvOr("QUEUE_TYPE", ""),
          "x-queue-type of declared queues, e.g. quorum; empty = classic [env QUEUE_TYPE]");
ABSL_FLAG(std::string, alertmanager_url, EnvOr("ALERTMANAGER_URL", ""),
          "Alertmanager base URL for dead-letter alerts, e.g. http://127.0.0.1:9093; empty = "
          "alerts only logged [env ALERTMANAGER_URL]");
ABSL_FLAG(std::string, metrics_listen, EnvOr("PAYMENT_METRICS_LISTEN", ""),
          "Prometheus /metrics on host:port; empty = off [env PAYMENT_METRICS_LISTEN]");
ABSL_FLAG(std::string, sqlite_synchronous, EnvOr("SQLITE_SYNCHRONOUS", "full"),
          "SQLite durability: full, normal or off [env SQLITE_SYNCHRONOUS]");
ABSL_FLAG(absl::Duration, recovery_base_delay,
          EnvOrDuration("RECOVERY_BASE_DELAY", absl::Seconds(5)),
          "first next_retry_at is now + this (recovery's linear backoff unit) "
          "[env RECOVERY_BASE_DELAY]");
ABSL_FLAG(int, recovery_max_attempts, EnvOrInt("RECOVERY_MAX_ATTEMPTS", 10),
          "publish attempts before a row becomes FAILED [env RECOVERY_MAX_ATTEMPTS]");
ABSL_FLAG(int, publish_window, EnvOrInt("PUBLISH_WINDOW", 256),
          "unconfirmed messages in flight on the fast path [env PUBLISH_WINDOW]");
ABSL_FLAG(int, prefetch, EnvOrInt("AMQP_PREFETCH", 256),
          "ACC_QUEUE prefetch, also the ack batch size [env AMQP_PREFETCH]");
ABSL_FLAG(int, group_commit_max, EnvOrInt("GROUP_COMMIT_MAX", 512),
          "most payments committed in one transaction [env GROUP_COMMIT_MAX]");

namespace outbox::payment {
namespace {

absl::Status Run() {
  const std::string listen = absl::GetFlag(FLAGS_payment_listen);
  RETURN_IF_ERROR(ValidateListenAddress(listen, "payment_listen"));
  if (absl::GetFlag(FLAGS_amqp_url).empty()) {
    return absl::InvalidArgumentError("--amqp_url (or AMQP_URL) is required");
  }
  auto url = AmqpUrl::Parse(absl::GetFlag(FLAGS_amqp_url));
  if (!url.ok()) return url.status();
  auto durability = ParseDurability(absl::GetFlag(FLAGS_sqlite_synchronous));
  if (!durability.ok()) return durability.status();
  if (absl::GetFlag(FLAGS_recovery_max_attempts) < 1 || absl::GetFlag(FLAGS_publish_window) < 1 ||
      absl::GetFlag(FLAGS_prefetch) < 1 || absl::GetFlag(FLAGS_prefetch) > 65535 ||
      absl::GetFlag(FLAGS_group_commit_max) < 1 ||
      absl::GetFlag(FLAGS_recovery_base_delay) <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--recovery_max_attempts, --publish_window, --group_commit_max and "
        "--recovery_base_delay must be positive; --prefetch 1..65535");
  }
  Topology topology;
  topology.pay_queue = absl::GetFlag(FLAGS_pay_queue);
  topology.acc_queue = absl::GetFlag(FLAGS_acc_queue);
  topology.queue_type = absl::GetFlag(FLAGS_queue_type);

  DbOptions db_options;
  db_options.durability = *durability;
  auto store = PaymentStore::Open(absl::GetFlag(FLAGS_payment_db), db_options);
  if (!store.ok()) return store.status();

  const Clock& clock = SystemClock::Get();
  UuidGenerator ids;
  PublisherOptions publisher_options;
  publisher_options.window = absl::GetFlag(FLAGS_publish_window);
  FastPublisher publisher(*url, topology, publisher_options,
                          [&](const std::vector<std::string>& message_ids, const std::string& error) {
                            absl::Status s = (*store)->RecordPublishError(message_ids, error,
                                                                          clock.NowMillis());
                            if (!s.ok()) LogWarning("record_publish_error_failed", {KV("error", s.message())});
                          });
  WriterOptions writer_options;
  writer_options.pay_queue = topology.pay_queue;
  writer_options.reply_to = topology.acc_queue;
  writer_options.max_attempts = absl::GetFlag(FLAGS_recovery_max_attempts);
  writer_options.backoff.base = absl::GetFlag(FLAGS_recovery_base_delay);
  writer_options.backoff.max = writer_options.backoff.base;  // only attempt 1 is set here
  writer_options.max_batch = absl::GetFlag(FLAGS_group_commit_max);
  PaymentWriter writer(**store, clock, ids, writer_options,
                       [&](std::vector<OutgoingMessage> m) { publisher.Enqueue(std::move(m)); });
  AckListenerOptions ack_options;
  ack_options.prefetch = absl::GetFlag(FLAGS_prefetch);
  AlerterOptions alert_options;
  alert_options.alertmanager_url = absl::GetFlag(FLAGS_alertmanager_url);
  alert_options.service = "payment_service";
  Alerter alerter(alert_options);
  AckListener acks([&](const std::vector<std::string>& ids) { return writer.MarkSent(ids); },
                   alerter, *url, topology, ack_options);

  publisher.Start();
  writer.Start();
  acks.Start();

  std::unique_ptr<MetricsServer> metrics;
  if (!absl::GetFlag(FLAGS_metrics_listen).empty()) {
    auto m = MetricsServer::Start(absl::GetFlag(FLAGS_metrics_listen), [&] {
      const PublisherStats ps = publisher.stats();
      const AckListenerStats& as = acks.stats();
      return absl::StrCat(
          MetricHeader("outbox_payments_created_total", "counter", "payments committed"),
          MetricLine("outbox_payments_created_total", writer.payments_created()),
          MetricHeader("outbox_group_commits_total", "counter", "write transactions (groups)"),
          MetricLine("outbox_group_commits_total", writer.groups_committed()),
          MetricHeader("outbox_fast_publish_total", "counter", "fast-path publishes by result"),
          MetricLine("outbox_fast_publish_total", ps.confirmed, "result=\"confirmed\""),
          MetricLine("outbox_fast_publish_total", ps.failed, "result=\"failed\""),
          MetricLine("outbox_fast_publish_total", ps.dropped, "result=\"dropped\""),
          MetricHeader("outbox_acks_total", "counter", "acknowledgements from ACC_QUEUE"),
          MetricLine("outbox_acks_total", as.acknowledged.load(), "result=\"marked_sent\""),
          MetricLine("outbox_acks_total", as.harmless.load(), "result=\"harmless\""),
          MetricHeader("outbox_dead_lettered_total", "counter", "undecodable messages dead-lettered"),
          MetricLine("outbox_dead_lettered_total", as.dead_lettered.load(),
                     absl::StrCat("queue=\"", topology.acc_queue, "\"")),
          MetricHeader("outbox_amqp_connected", "gauge", "1 when the connection is up"),
          MetricLine("outbox_amqp_connected", publisher.connected(), "connection=\"publisher\""),
          MetricLine("outbox_amqp_connected", acks.connected(), "connection=\"ack_listener\""));
    });
    if (!m.ok()) return m.status();
    metrics = std::move(m).value();
  }

  PaymentServiceImpl service(writer, **store);
  int port = 0;
  auto server = StartGrpcServer(listen, {&service}, &port);
  if (!server.ok()) return server.status();
  LogInfo("payment_service_started", {KV("listen", listen), KV("port", port),
                                      KV("db", absl::GetFlag(FLAGS_payment_db)),
                                      KV("amqp", url->Redacted()),
                                      KV("sqlite_synchronous", absl::GetFlag(FLAGS_sqlite_synchronous))});

  const std::string signal = WaitForShutdownSignal();
  LogInfo("payment_service_stopping", {KV("signal", signal)});
  // In-flight calls finish (bounded), then the ack listener hands its last
  // batch to the writer, the writer drains, and the publisher sends what was
  // committed.
  ShutdownGrpcServer(**server);
  LogInfo("grpc_server_stopped");
  acks.Stop();
  writer.Stop();
  publisher.Stop();
  alerter.Stop();
  metrics.reset();
  const PublisherStats ps = publisher.stats();
  LogInfo("payment_service_stopped", {KV("published", ps.confirmed), KV("publish_failed", ps.failed),
                                      KV("acknowledged", acks.stats().acknowledged.load())});
  return absl::OkStatus();
}

}  // namespace
}  // namespace outbox::payment

int main(int argc, char** argv) {
  outbox::BlockShutdownSignals();
  outbox::InitCommandLine(
      "payment_service: payments with a transactional outbox.\n"
      "Every flag defaults from the environment variable named in its help.");
  absl::ParseCommandLine(argc, argv);
  absl::Status s = outbox::payment::Run();
  if (!s.ok()) {
    outbox::LogError("payment_service_failed", {outbox::KV("error", s.ToString())});
    return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}
