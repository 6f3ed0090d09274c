// payment_service: CreatePayment writes a payment and its outbox row in one
// SQLite transaction, publishes to PAY_QUEUE right after the commit, and marks
// the row SENT when accounting's reply arrives on ACC_QUEUE.
#include "absl/flags/flag.h"
#include "payment_service/ack_listener.h"
#include "payment_service/fast_publisher.h"
#include "payment_service/payment_grpc.h"
#include "payment_service/payment_writer.h"
#include "shared/amqp/amqp_transport.h"
#include "shared/base/status_macros.h"
#include "shared/observability/log.h"
#include "shared/runtime/env.h"
#include "shared/service/service_flags.h"
#include "shared/service/service_main.h"

using outbox::EnvOr;
using outbox::EnvOrInt;

ABSL_FLAG(std::string, payment_listen, EnvOr("PAYMENT_LISTEN", "127.0.0.1:50051"),
          "gRPC listen address host:port [env PAYMENT_LISTEN]");
ABSL_FLAG(std::string, payment_db, EnvOr("PAYMENT_DB", "payment.db"),
          "SQLite file holding payments and the outbox [env PAYMENT_DB]");
ABSL_FLAG(std::string, metrics_listen, EnvOr("PAYMENT_METRICS_LISTEN", ""),
          "Prometheus /metrics on host:port; empty = off [env PAYMENT_METRICS_LISTEN]");
ABSL_FLAG(int, publish_window, EnvOrInt("PUBLISH_WINDOW", 256),
          "unconfirmed messages in flight on the fast path [env PUBLISH_WINDOW]");
ABSL_FLAG(int, prefetch, EnvOrInt("AMQP_PREFETCH", 1024),
          "ACC_QUEUE prefetch, also the ack batch size [env AMQP_PREFETCH]");
ABSL_FLAG(int, group_commit_max, EnvOrInt("GROUP_COMMIT_MAX", 512),
          "most payments committed in one transaction [env GROUP_COMMIT_MAX]");
ABSL_FLAG(int64_t, max_unsent, EnvOrInt("MAX_UNSENT", 512),
          "while accounting replies but this many payments are SENDING, new payments wait "
          "(up to --max_hold_ms) for its acks; 0 = never [env MAX_UNSENT]");
ABSL_FLAG(int, max_hold_ms, EnvOrInt("MAX_HOLD_MS", 20),
          "longest a new payment waits for accounting's backlog [env MAX_HOLD_MS]");
ABSL_FLAG(std::string, api_token_file, EnvOr("API_TOKEN_FILE", ""),
          "file holding the client token; when set every PaymentService call needs "
          "'authorization: Bearer <token>' (health and reflection stay open) [env API_TOKEN_FILE]");
ABSL_FLAG(std::string, payment_shards, EnvOr("PAYMENT_SHARDS", ""),
          "every payment shard's gRPC address host:port, comma-separated, by shard index; "
          "empty = one shard [env PAYMENT_SHARDS]");
ABSL_FLAG(int, payment_shard_index, EnvOrInt("PAYMENT_SHARD_INDEX", 0),
          "this instance's index in --payment_shards [env PAYMENT_SHARD_INDEX]");

namespace outbox::payment {
namespace {

absl::Status Run() {
  const std::string listen = absl::GetFlag(FLAGS_payment_listen);
  ASSIGN_OR_RETURN(ServiceConfig config, ServiceConfigFromFlags());
  ASSIGN_OR_RETURN(BearerTokenCheck auth,
                   LoadBearerToken(absl::GetFlag(FLAGS_api_token_file), "api_token_file"));
  ASSIGN_OR_RETURN(ShardConfig shard, ParseShardConfig(absl::GetFlag(FLAGS_payment_shards),
                                                       absl::GetFlag(FLAGS_payment_shard_index)));
  PublisherOptions publisher_options;
  publisher_options.window = absl::GetFlag(FLAGS_publish_window);
  WriterOptions writer_options{config.pay_queue, config.acc_queue, config.retry,
                               static_cast<size_t>(absl::GetFlag(FLAGS_group_commit_max))};
  writer_options.max_unsent = absl::GetFlag(FLAGS_max_unsent);
  writer_options.max_hold = absl::Milliseconds(absl::GetFlag(FLAGS_max_hold_ms));
  AckListenerOptions ack_options{config.acc_queue, absl::GetFlag(FLAGS_prefetch)};
  ack_options.keys = config.keys();
  if (publisher_options.window < 1 || writer_options.max_batch < 1 || ack_options.prefetch < 1 ||
      ack_options.prefetch > 65535) {
    return absl::InvalidArgumentError(
        "--publish_window and --group_commit_max must be positive; --prefetch 1..65535");
  }
  if (writer_options.max_unsent < 0 || absl::GetFlag(FLAGS_max_hold_ms) < 0 ||
      absl::GetFlag(FLAGS_max_hold_ms) > 1000) {
    return absl::InvalidArgumentError("--max_unsent must be >= 0; --max_hold_ms 0..1000");
  }

  // The listen addresses last among the checks (they probe this host), and
  // before anything opens a file or a connection.
  RETURN_IF_ERROR(ValidateListenAddress(listen, "payment_listen"));
  if (!absl::GetFlag(FLAGS_metrics_listen).empty()) {
    RETURN_IF_ERROR(ValidateListenAddress(absl::GetFlag(FLAGS_metrics_listen), "metrics_listen"));
  }

  const Clock& clock = SystemClock::Get();
  TimeOrderedUuidGenerator uuids;  // new keys land together in each unique index
  ShardIds ids(uuids, shard);      // "s<index>-<uuid>" with several shards
  MetricsRegistry metrics;
  ASSIGN_OR_RETURN(auto store, PaymentStore::Open(absl::GetFlag(FLAGS_payment_db), config.db));
  AmqpPublisher amqp(config.amqp, config.payment_events(), "payment-fast-publisher");
  SigningPublisher broker(amqp, config.keys());
  AmqpConsumer replies(config.amqp, Topology{}, "payment-ack-listener", config.acc_queue,
                       ack_options.prefetch);
  // Data path: handler -> writer (group commit) -> publisher (PAY_QUEUE);
  // ACC_QUEUE -> ack listener -> writer (next group marks the rows SENT).
  FastPublisher publisher(broker, *store, clock, metrics, publisher_options);
  PaymentWriter writer(*store, clock, ids, metrics, writer_options, publisher);
  AckListener acks(replies, writer, metrics, ack_options);
  PaymentServiceImpl service(writer, *store, config.max_amount_minor, std::move(auth),
                             ShardGuard(shard));
  // Ports first: a process that cannot serve (a port in use) exits before its
  // workers touch the broker. A call arriving meanwhile waits for the writer.
  ASSIGN_OR_RETURN(auto serving, Serving::Start(listen, {&service},
                                                absl::GetFlag(FLAGS_metrics_listen), metrics,
                                                config.tls));
  publisher.Start();
  writer.Start();
  acks.Start();
  LogInfo("payment_service_started",
          {KV("listen", listen), KV("port", serving->port()), KV("tls", config.tls.enabled()),
           KV("db", absl::GetFlag(FLAGS_payment_db)), KV("shard", shard.index),
           KV("shards", shard.count()), KV("reply_queue", config.acc_queue),
           KV("amqp", config.amqp.Redacted()),
           KV("message_signing", config.message_signing())});
  LogInfo("payment_service_stopping", {KV("signal", serving->WaitForShutdownSignal())});
  // In-flight calls finish (bounded), the ack listener hands its last batch to
  // the writer, the writer drains, and the publisher sends what was committed.
  serving->Shutdown();
  acks.Stop();
  writer.Stop();
  publisher.Stop();
  LogInfo("payment_service_stopped", {KV("published", publisher.confirmed()),
                                      KV("publish_failed", publisher.failed()),
                                      KV("acknowledged", acks.acknowledged())});
  return absl::OkStatus();
}

}  // namespace
}  // namespace outbox::payment

int main(int argc, char** argv) {
  return outbox::RunServiceMain(argc, argv, "payment_service",
                                "Payments with a transactional outbox: a payment and its message in one SQLite\n"
                                "transaction, published to PAY_QUEUE, SENT when accounting replies.",
                                outbox::payment::Run);
}
