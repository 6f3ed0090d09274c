#include "accounting_service/accounting_wiring.h"

#include "absl/strings/str_cat.h"
#include "accounting_service/accounting_grpc.h"
#include "accounting_service/accounting_store.h"
#include "service_kit/failpoints.h"
#include "service_kit/service_main.h"
#include "shared/base/status_macros.h"
#include "shared/observability/log.h"

namespace outbox::accounting {

Consumer::Options ConsumerOptionsOf(const AccountingServiceOptions& options,
                                    MetricsRegistry& metrics) {
  const ServiceConfig& config = options.service;
  Consumer::Options consumer;
  consumer.amqp = config.amqp;
  consumer.queue = config.payment_event_queue(options.shard);
  consumer.reply_queue = config.acc_queue;
  // payment_service declares the payment queues, with arguments of its own.
  consumer.topology = Topology{};
  // The side that writes a queue declares it: payment shards' reply queues too.
  Topology replies = config.replies();
  for (const std::string& q : options.reply_queues) {
    if (q != config.acc_queue) replies.queues.emplace_back(q);
  }
  consumer.reply_topology = std::move(replies);
  consumer.signing = config.keys() != nullptr ? Signing::With(*config.keys()) : Signing::Unsigned();
  consumer.name = "accounting";
  consumer.prefetch = options.prefetch;
  consumer.linger = absl::Milliseconds(options.consume_linger_ms);
  consumer.linger_batch = options.consume_linger_batch;
  consumer.inbox_retention = options.processed_retention;
  consumer.booked_metric = "outbox_vouchers_created_total";
  consumer.booked_help = "vouchers booked";
  consumer.after_apply_failpoint = kFpAccountingAfterCommitBeforeReply;
  consumer.before_ack_failpoint = kFpAccountingAfterReplyBeforeAck;
  consumer.clock = &SystemClock::Get();
  consumer.metrics = &metrics;
  return consumer;
}

absl::Status RunAccountingService(const AccountingServiceOptions& options) {
  const std::string& listen = options.listen;
  const ServiceConfig& config = options.service;

  // The listen addresses last among the checks (they probe this host), and
  // before anything opens a file or a connection.
  RETURN_IF_ERROR(ValidateListenAddress(listen, "accounting_listen"));
  if (!options.metrics_listen.empty()) {
    RETURN_IF_ERROR(ValidateListenAddress(options.metrics_listen, "metrics_listen"));
  }

  const Clock& clock = SystemClock::Get();
  TimeOrderedUuidGenerator ids;  // voucher ids: new keys land together in their index
  MetricsRegistry metrics;
  BookingRules rules;
  rules.max_amount_minor = config.max_amount_minor;
  rules.currencies = options.currencies;
  ASSIGN_OR_RETURN(auto store,
                   OpenAccountingStore(options.db, config.db, ids, clock, std::move(rules)));
  store->RegisterMetrics(metrics);
  AccountingServiceImpl service(store->reads());
  // Ports first: a process that cannot serve (a port in use) exits before it
  // consumes, and books, a single payment.
  ASSIGN_OR_RETURN(auto serving, Serving::Start(listen, {{&service, options.auth}},
                                                options.metrics_listen, metrics, config.tls));
  // The role's connections, signed replies, idempotent consumer and inbox pruner.
  ASSIGN_OR_RETURN(auto consumer,
                   Consumer::Start(store->handler(), ConsumerOptionsOf(options, metrics)));
  const absl::Duration retention = consumer->options().inbox_retention;
  LogInfo("accounting_service_started",
          {KV("listen", listen), KV("port", serving->port()), KV("db", store->where()),
           KV("queue", consumer->options().queue),
           KV("shard", absl::StrCat(options.shard, "/", config.accounting_shards)),
           KV("amqp", config.amqp.Redacted()), KV("message_signing", config.message_signing()),
           KV("processed_retention",
              retention > absl::ZeroDuration() ? absl::FormatDuration(retention) : "forever")});
  LogInfo("accounting_service_stopping", {KV("signal", serving->WaitForShutdownSignal())});
  serving->Shutdown();
  consumer->Stop();
  LogInfo("accounting_service_stopped",
          {KV("applied", consumer->booked()), KV("duplicates", consumer->duplicates()),
           KV("dead_lettered", consumer->dead_lettered()),
           KV("unauthenticated", consumer->unauthenticated())});
  return absl::OkStatus();
}

}  // namespace outbox::accounting
