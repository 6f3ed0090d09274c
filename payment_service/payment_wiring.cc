#include "payment_service/payment_wiring.h"

#include "payment_service/payment_codec.h"
#include "payment_service/payment_grpc.h"
#include "payment_service/payment_writer.h"
#include "service_kit/failpoints.h"
#include "service_kit/service_main.h"
#include "shared/amqp/amqp_transport.h"
#include "shared/base/status_macros.h"
#include "shared/observability/log.h"
#include "shared/outbox/ack_listener.h"
#include "shared/outbox/relay.h"
#include "shared/runtime/failpoint.h"

namespace outbox::payment {

namespace {

RelayOptions RelayOptionsOf(const PaymentServiceOptions& options) {
  RelayOptions publisher_options;
  publisher_options.window = options.publish_window;
  publisher_options.hand_over_after = options.service.retry.base_delay;  // the rows' first retry
  publisher_options.after_publish_failpoint = kFpPaymentAfterPublishBeforeReply;
  return publisher_options;
}

WriterOptions WriterOptionsOf(const PaymentServiceOptions& options) {
  const ServiceConfig& config = options.service;
  WriterOptions writer_options{config.pay_queue, config.acc_queue, config.retry,
                               static_cast<size_t>(options.group_commit_max)};
  writer_options.max_unsent = options.max_unsent;
  writer_options.max_hold = absl::Milliseconds(options.max_hold_ms);
  writer_options.ack_linger = absl::Milliseconds(options.ack_linger_ms);
  return writer_options;
}

AckListenerOptions AckListenerOptionsOf(const PaymentServiceOptions& options) {
  AckListenerOptions ack_options{options.service.acc_queue, options.prefetch};
  ack_options.keys = options.service.keys();
  ack_options.biz_key_label = "payment_id";
  ack_options.record_failpoint = kFpPaymentReplyBeforeRecordAcks;
  return ack_options;
}

// Starts the workers, serves until SIGTERM or SIGINT, then stops: in-flight
// calls finish (bounded), the ack listener hands its last batch to the
// writer, the writer drains, and the publisher sends what was committed.
void ServeUntilSignal(const PaymentServiceOptions& options, Serving& serving, Relay& publisher,
                      PaymentWriter& writer, AckListener& acks) {
  const ServiceConfig& config = options.service;
  publisher.Start();
  writer.Start(publisher);
  acks.Start();
  LogInfo("payment_service_started",
          {KV("listen", options.listen), KV("port", serving.port()),
           KV("tls", config.tls.enabled()), KV("db", options.db), KV("shard", options.shard.index),
           KV("shards", options.shard.count()), KV("reply_queue", config.acc_queue),
           KV("amqp", config.amqp.Redacted()), KV("message_signing", config.message_signing())});
  LogInfo("payment_service_stopping", {KV("signal", serving.WaitForShutdownSignal())});
  serving.Shutdown();
  acks.Stop();
  writer.Stop();
  publisher.Stop();
  LogInfo("payment_service_stopped",
          {KV("published", publisher.confirmed()), KV("publish_failed", publisher.failed()),
           KV("acknowledged", acks.acknowledged())});
}

}  // namespace

absl::Status RunPaymentService(const PaymentServiceOptions& options) {
  const std::string& listen = options.listen;
  const ServiceConfig& config = options.service;
  const ShardConfig& shard = options.shard;
  const RelayOptions publisher_options = RelayOptionsOf(options);
  const WriterOptions writer_options = WriterOptionsOf(options);
  const AckListenerOptions ack_options = AckListenerOptionsOf(options);

  // The listen addresses last among the checks (they probe this host), and
  // before anything opens a file or a connection.
  RETURN_IF_ERROR(ValidateListenAddress(listen, "payment_listen"));
  if (!options.metrics_listen.empty()) {
    RETURN_IF_ERROR(ValidateListenAddress(options.metrics_listen, "metrics_listen"));
  }

  const Clock& clock = SystemClock::Get();
  TimeOrderedUuidGenerator uuids;  // new keys land together in each unique index
  ShardIds ids(uuids, shard);      // "s<index>-<uuid>" with several shards
  MetricsRegistry metrics;
  ASSIGN_OR_RETURN(auto store, PaymentStore::Open(options.db, config.db));
  store->RegisterMetrics(metrics);
  AmqpPublisher amqp(config.amqp, config.payment_events(), "payment-fast-publisher");
  SigningPublisher broker(amqp, config.keys());
  AmqpConsumer replies(config.amqp, Topology{}, "payment-ack-listener", config.acc_queue,
                       ack_options.prefetch);
  // Data path: handler -> writer (group commit) -> publisher (PAY_QUEUE);
  // ACC_QUEUE -> ack listener -> writer (next group marks the rows SENT).
  PaymentWriter writer(*store, clock, ids, metrics, writer_options);
  Relay publisher(broker, writer, clock, metrics, publisher_options);
  AckListener acks(replies, writer, DecodeAccountingReply, metrics, ack_options);
  PaymentServiceImpl service(writer, *store, config.max_amount_minor, ShardGuard(shard));
  // Ports first: a process that cannot serve (a port in use) exits before its
  // workers touch the broker. A call arriving meanwhile waits for the writer.
  ASSIGN_OR_RETURN(auto serving, Serving::Start(listen, {{&service, options.auth}},
                                                options.metrics_listen, metrics, config.tls));
  ServeUntilSignal(options, *serving, publisher, writer, acks);
  return absl::OkStatus();
}

}  // namespace outbox::payment
