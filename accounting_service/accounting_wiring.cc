#include "accounting_service/accounting_wiring.h"

#include "absl/strings/str_cat.h"
#include "accounting_service/accounting_grpc.h"
#include "accounting_service/payment_consumer.h"
#include "accounting_service/voucher_store.h"
#include "service_kit/service_main.h"
#include "shared/amqp/amqp_transport.h"
#include "shared/base/status_macros.h"
#include "shared/observability/log.h"
#include "shared/outbox/inbox_pruner.h"

namespace outbox::accounting {

absl::Status RunAccountingService(const AccountingServiceOptions& options) {
  const std::string& listen = options.listen;
  const ServiceConfig& config = options.service;
  const int shard = options.shard;
  ConsumerOptions consumer_options{config.payment_event_queue(shard), config.acc_queue,
                                   options.prefetch};
  consumer_options.linger = absl::Milliseconds(options.consume_linger_ms);
  consumer_options.linger_batch = options.consume_linger_batch;
  consumer_options.rules.max_amount_minor = config.max_amount_minor;
  consumer_options.rules.currencies = options.currencies;
  consumer_options.keys = config.keys();
  PrunerOptions pruning;
  pruning.retention = options.processed_retention;

  // The listen addresses last among the checks (they probe this host), and
  // before anything opens a file or a connection.
  RETURN_IF_ERROR(ValidateListenAddress(listen, "accounting_listen"));
  if (!options.metrics_listen.empty()) {
    RETURN_IF_ERROR(ValidateListenAddress(options.metrics_listen, "metrics_listen"));
  }

  const Clock& clock = SystemClock::Get();
  TimeOrderedUuidGenerator ids;  // voucher ids: new keys land together in their index
  MetricsRegistry metrics;
  ASSIGN_OR_RETURN(auto store, VoucherStore::Open(options.db, config.db, ids, clock));
  store->RegisterMetrics(metrics);
  AmqpConsumer payments(config.amqp, Topology{}, "accounting-consumer", consumer_options.pay_queue,
                        consumer_options.prefetch);
  // The side that writes a queue declares it: payment shards' reply queues too.
  Topology reply_topology = config.replies();
  for (const std::string& q : options.reply_queues) {
    if (q != config.acc_queue) reply_topology.queues.emplace_back(q);
  }
  AmqpPublisher amqp_replies(config.amqp, reply_topology, "accounting-replies");
  SigningPublisher replies(amqp_replies, config.keys());
  PaymentConsumer consumer(payments, replies, *store, clock, metrics, consumer_options);
  ProcessedPruner pruner(*store, clock, metrics, pruning);
  AccountingServiceImpl service(*store);
  // Ports first: a process that cannot serve (a port in use) exits before it
  // consumes, and books, a single payment.
  ASSIGN_OR_RETURN(auto serving, Serving::Start(listen, {{&service, options.auth}},
                                                options.metrics_listen, metrics, config.tls));
  consumer.Start();
  if (pruning.retention > absl::ZeroDuration()) pruner.Start();
  LogInfo("accounting_service_started",
          {KV("listen", listen), KV("port", serving->port()), KV("db", options.db),
           KV("queue", consumer_options.pay_queue),
           KV("shard", absl::StrCat(shard, "/", config.accounting_shards)),
           KV("amqp", config.amqp.Redacted()), KV("message_signing", config.message_signing()),
           KV("processed_retention", pruning.retention > absl::ZeroDuration()
                                         ? absl::FormatDuration(pruning.retention)
                                         : "forever")});
  LogInfo("accounting_service_stopping", {KV("signal", serving->WaitForShutdownSignal())});
  serving->Shutdown();
  pruner.Stop();
  consumer.Stop();
  LogInfo("accounting_service_stopped",
          {KV("applied", consumer.applied()), KV("duplicates", consumer.duplicates()),
           KV("dead_lettered", consumer.dead_lettered()),
           KV("unauthenticated", consumer.unauthenticated())});
  return absl::OkStatus();
}

}  // namespace outbox::accounting
