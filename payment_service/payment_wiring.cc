#include "payment_service/payment_wiring.h"

#include "payment_service/payment_codec.h"
#include "payment_service/payment_grpc.h"
#include "payment_service/payment_pg_store.h"
#include "service_kit/failpoints.h"
#include "service_kit/service_main.h"
#include "shared/amqp/internal/amqp_transport.h"
#include "shared/base/status_macros.h"
#include "shared/observability/log.h"
#include "shared/postgres/pg_connection.h"
#include "shared/postgres/pg_producer.h"
#include "shared/roles/producer.h"

namespace outbox::payment {

namespace {

// The producer role on payment.db: PaymentCreated events to PAY_QUEUE,
// accounting's replies from ACC_QUEUE. The relay hands a message over to
// recovery after its first retry delay (HandOverAfter).
Producer::Options ProducerOptionsOf(const PaymentServiceOptions& options,
                                    MetricsRegistry& metrics) {
  const ServiceConfig& config = options.service;
  Producer::Options producer;
  producer.amqp = config.amqp;
  producer.queue = config.pay_queue;
  producer.reply_queue = config.acc_queue;
  producer.signing = config.keys() != nullptr ? Signing::With(*config.keys()) : Signing::Unsigned();
  producer.retry = config.retry;
  producer.name = "payment";
  producer.window = options.publish_window;
  producer.reply_prefetch = options.prefetch;
  producer.decode_reply = DecodeAccountingReply;
  producer.biz_key_label = "payment_id";
  producer.after_publish_failpoint = kFpPaymentAfterPublishBeforeReply;
  producer.record_acks_failpoint = kFpPaymentReplyBeforeRecordAcks;
  GroupWriterOptions& group = producer.group_commit;
  group.max_batch = static_cast<size_t>(options.group_commit_max);
  group.max_unsent = options.max_unsent;
  group.max_hold = absl::Milliseconds(options.max_hold_ms);
  group.ack_linger = absl::Milliseconds(options.ack_linger_ms);
  group.before_commit_failpoint = kFpPaymentBeforeCommit;
  group.after_commit_failpoint = kFpPaymentAfterCommitBeforePublish;
  group.written_metric = "outbox_payments_created_total";
  group.written_help = "payments committed";
  producer.clock = &SystemClock::Get();
  producer.metrics = &metrics;
  return producer;
}

// The same on PostgreSQL: PgProducer reads Producer's options but its group
// commit's, which are PgGroupWriter's (the backpressure, the crash points
// and the counter alike; ack_linger is SQLite's: acknowledgements commit in
// the ack listener's own transactions). A --group_commit_max left at
// SQLite's default takes PgGroupWriter's (a savepoint per write: see
// PgGroupWriterOptions).
PgProducer::Options PgProducerOptionsOf(const PaymentServiceOptions& options,
                                        MetricsRegistry& metrics) {
  PgProducer::Options producer;
  static_cast<Producer::Options&>(producer) = ProducerOptionsOf(options, metrics);
  const GroupWriterOptions& sqlite_group = producer.group_commit;
  PgGroupWriterOptions& group = producer.pg_group_commit;
  if (options.group_commit_max != static_cast<int>(GroupWriterOptions{}.max_batch)) {
    group.max_batch = static_cast<size_t>(options.group_commit_max);
  }
  group.max_unsent = sqlite_group.max_unsent;
  group.max_hold = sqlite_group.max_hold;
  group.before_commit_failpoint = sqlite_group.before_commit_failpoint;
  group.after_commit_failpoint = sqlite_group.after_commit_failpoint;
  group.written_metric = sqlite_group.written_metric;
  group.written_help = sqlite_group.written_help;
  producer.recovery_in_process = false;  // recovery_service's, as on SQLite
  return producer;
}

// Starts the workers, serves until SIGTERM or SIGINT, then stops: in-flight
// calls finish (bounded), the ack listener hands its last batch to the
// writer, the writer drains, and the relay sends what was committed.
// `producer`: Producer or PgProducer; `db`: the store for the log, never
// with a password.
template <typename AnyProducer>
void ServeUntilSignal(const PaymentServiceOptions& options, const std::string& db, Serving& serving,
                      AnyProducer& producer) {
  const ServiceConfig& config = options.service;
  producer.StartWorkers();
  LogInfo("payment_service_started",
          {KV("listen", options.listen), KV("port", serving.port()),
           KV("tls", config.tls.enabled()), KV("db", db), KV("shard", options.shard.index),
           KV("shards", options.shard.count()), KV("reply_queue", config.acc_queue),
           KV("amqp", config.amqp.Redacted()), KV("message_signing", config.message_signing())});
  LogInfo("payment_service_stopping", {KV("signal", serving.WaitForShutdownSignal())});
  serving.Shutdown();
  producer.Stop();
  LogInfo("payment_service_stopped",
          {KV("published", producer.confirmed()), KV("publish_failed", producer.publish_failed()),
           KV("acknowledged", producer.acknowledged())});
}

// The service on payment.db (SQLite).
absl::Status RunOnSqlite(const PaymentServiceOptions& options, IdGenerator& ids,
                         MetricsRegistry& metrics) {
  const ServiceConfig& config = options.service;
  ASSIGN_OR_RETURN(auto store, PaymentStore::Open(options.db, config.db));
  store->RegisterMetrics(metrics);
  Producer::Options producer_options = ProducerOptionsOf(options, metrics);
  // The service's own links: the publisher declares the payment topology,
  // the ack listener reads ACC_QUEUE.
  auto publisher = std::make_unique<AmqpPublisher>(config.amqp, config.payment_events(),
                                                   "payment-fast-publisher");
  auto replies = std::make_unique<AmqpConsumer>(config.amqp, Topology{}, "payment-ack-listener",
                                                config.acc_queue, options.prefetch);
  // Data path: handler -> producer's writer (group commit) -> relay
  // (PAY_QUEUE); ACC_QUEUE -> ack listener -> writer (the next group marks
  // the rows SENT).
  ASSIGN_OR_RETURN(auto producer, Producer::Create(store->file(), std::move(producer_options),
                                                   std::move(publisher), std::move(replies)));
  PaymentCreator creator(*producer, *store, ids, SystemClock::Get());
  PaymentServiceImpl service(creator, *store, config.max_amount_minor, ShardGuard(options.shard));
  // Ports first: a process that cannot serve (a port in use) exits before its
  // workers touch the broker. The producer's writer runs from Create: a call
  // arriving meanwhile is committed, and its message waits for the relay.
  ASSIGN_OR_RETURN(auto serving, Serving::Start(options.listen, {{&service, options.auth}},
                                                options.metrics_listen, metrics, config.tls));
  ServeUntilSignal(options, options.db, *serving, *producer);
  return absl::OkStatus();
}

// The service on a PostgreSQL database: the payments and the library's
// outbox tables in it, each in its versioned schema, upgraded here. Three
// connections: the reads', the group commit's and the ack listener's. Any
// number of processes may share the database (an acknowledgement closes
// its row whichever process wrote it; a key is one payment database-wide).
absl::Status RunOnPostgres(const PaymentServiceOptions& options, IdGenerator& ids,
                           MetricsRegistry& metrics) {
  const ServiceConfig& config = options.service;
  ASSIGN_OR_RETURN(auto store, PgPaymentStore::Open(options.db));
  PgConnection::Options connection;
  connection.application_name = "payment_service";
  ASSIGN_OR_RETURN(auto writer, PgSession::Open(options.db, connection));
  ASSIGN_OR_RETURN(auto acks, PgSession::Open(options.db, connection));
  auto publisher = std::make_unique<AmqpPublisher>(config.amqp, config.payment_events(),
                                                   "payment-fast-publisher");
  auto replies = std::make_unique<AmqpConsumer>(config.amqp, Topology{}, "payment-ack-listener",
                                                config.acc_queue, options.prefetch);
  ASSIGN_OR_RETURN(auto producer,
                   PgProducer::Create(*writer, *acks, PgProducerOptionsOf(options, metrics),
                                      std::move(publisher), std::move(replies)));
  PaymentCreator creator = PgPaymentCreator(*producer, ids, SystemClock::Get());
  PaymentServiceImpl service(creator, *store, config.max_amount_minor, ShardGuard(options.shard));
  ASSIGN_OR_RETURN(auto serving, Serving::Start(options.listen, {{&service, options.auth}},
                                                options.metrics_listen, metrics, config.tls));
  ServeUntilSignal(options, store->redacted(), *serving, *producer);
  return absl::OkStatus();
}

}  // namespace

absl::Status RunPaymentService(const PaymentServiceOptions& options) {
  // The listen addresses last among the checks (they probe this host), and
  // before anything opens a file or a connection.
  RETURN_IF_ERROR(ValidateListenAddress(options.listen, "payment_listen"));
  if (!options.metrics_listen.empty()) {
    RETURN_IF_ERROR(ValidateListenAddress(options.metrics_listen, "metrics_listen"));
  }
  TimeOrderedUuidGenerator uuids;      // new keys land together in each unique index
  ShardIds ids(uuids, options.shard);  // "s<index>-<uuid>" with several shards
  MetricsRegistry metrics;
  if (IsPgConninfo(options.db)) return RunOnPostgres(options, ids, metrics);
  return RunOnSqlite(options, ids, metrics);
}

}  // namespace outbox::payment
