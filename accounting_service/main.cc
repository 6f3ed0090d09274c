// accounting_service: consumes PAY_QUEUE idempotently (voucher + processed
// message id in one transaction) and replies on ACC_QUEUE, duplicates included.
#include "absl/flags/flag.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_cat.h"
#include "accounting_service/accounting_grpc.h"
#include "accounting_service/payment_consumer.h"
#include "accounting_service/processed_pruner.h"
#include "accounting_service/voucher_store.h"
#include "shared/amqp/amqp_transport.h"
#include "shared/base/status_macros.h"
#include "shared/observability/log.h"
#include "shared/runtime/env.h"
#include "shared/service/service_flags.h"
#include "shared/service/service_main.h"

using outbox::EnvOr;
using outbox::EnvOrDuration;
using outbox::EnvOrInt;

ABSL_FLAG(std::string, accounting_listen, EnvOr("ACCOUNTING_LISTEN", "127.0.0.1:50052"),
          "gRPC listen address host:port [env ACCOUNTING_LISTEN]");
ABSL_FLAG(std::string, accounting_db, EnvOr("ACCOUNTING_DB", "accounting.db"),
          "SQLite file holding vouchers and processed message ids [env ACCOUNTING_DB]");
ABSL_FLAG(std::string, metrics_listen, EnvOr("ACCOUNTING_METRICS_LISTEN", ""),
          "Prometheus /metrics on host:port; empty = off [env ACCOUNTING_METRICS_LISTEN]");
ABSL_FLAG(int, prefetch, EnvOrInt("AMQP_PREFETCH", 256),
          "PAY_QUEUE prefetch, also the largest batch applied in one transaction "
          "[env AMQP_PREFETCH]");
ABSL_FLAG(int, accounting_shard, EnvOrInt("ACCOUNTING_SHARD", 0),
          "which of the --accounting_shards this instance is, 0..M-1: it consumes "
          "<pay_queue>-<shard> (pay_queue itself when M is 1) into its own --accounting_db "
          "[env ACCOUNTING_SHARD]");
ABSL_FLAG(std::string, api_token_file, EnvOr("API_TOKEN_FILE", ""),
          "file holding the client token; when set every AccountingService call needs "
          "'authorization: Bearer <token>' (health and reflection stay open) [env API_TOKEN_FILE]");
ABSL_FLAG(absl::Duration, processed_retention,
          EnvOrDuration("PROCESSED_RETENTION", absl::Hours(720)),
          "processed message ids older than this are deleted, a batch at a time; 0 keeps them "
          "all. A pruned id books nothing again: the payment's voucher stays "
          "[env PROCESSED_RETENTION]");
ABSL_FLAG(std::string, reply_queues, EnvOr("REPLY_QUEUES", ""),
          "reply queues to declare and bind besides ACC_QUEUE, comma-separated: each payment "
          "shard's (e.g. ACC_QUEUE.s0,ACC_QUEUE.s1); replies go to each message's reply_to "
          "[env REPLY_QUEUES]");

namespace outbox::accounting {
namespace {

absl::Status Run() {
  const std::string listen = absl::GetFlag(FLAGS_accounting_listen);
  ASSIGN_OR_RETURN(ServiceConfig config, ServiceConfigFromFlags());
  ASSIGN_OR_RETURN(BearerTokenCheck auth,
                   LoadBearerToken(absl::GetFlag(FLAGS_api_token_file), "api_token_file"));
  const int shard = absl::GetFlag(FLAGS_accounting_shard);
  if (shard < 0 || shard >= config.accounting_shards) {
    return absl::InvalidArgumentError(absl::StrCat("--accounting_shard must be 0..",
                                                   config.accounting_shards - 1,
                                                   " (--accounting_shards - 1)"));
  }
  ConsumerOptions options{config.payment_event_queue(shard), config.acc_queue,
                          absl::GetFlag(FLAGS_prefetch)};
  options.max_amount_minor = config.max_amount_minor;
  options.keys = config.keys();
  if (options.prefetch < 1 || options.prefetch > 65535) {
    return absl::InvalidArgumentError("--prefetch must be 1..65535");
  }
  PrunerOptions pruning;
  pruning.retention = absl::GetFlag(FLAGS_processed_retention);
  if (pruning.retention < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--processed_retention must be >= 0 (0 keeps every id)");
  }

  // The listen addresses last among the checks (they probe this host), and
  // before anything opens a file or a connection.
  RETURN_IF_ERROR(ValidateListenAddress(listen, "accounting_listen"));
  if (!absl::GetFlag(FLAGS_metrics_listen).empty()) {
    RETURN_IF_ERROR(ValidateListenAddress(absl::GetFlag(FLAGS_metrics_listen), "metrics_listen"));
  }

  const Clock& clock = SystemClock::Get();
  TimeOrderedUuidGenerator ids;  // voucher ids: new keys land together in their index
  MetricsRegistry metrics;
  ASSIGN_OR_RETURN(auto store, VoucherStore::Open(absl::GetFlag(FLAGS_accounting_db), config.db,
                                                  ids, clock));
  AmqpConsumer payments(config.amqp, Topology{}, "accounting-consumer", options.pay_queue,
                        options.prefetch);
  // The side that writes a queue declares it: payment shards' reply queues too.
  Topology reply_topology = config.replies();
  const std::string extra_replies = absl::GetFlag(FLAGS_reply_queues);
  for (absl::string_view q : absl::StrSplit(extra_replies, ',', absl::SkipEmpty())) {
    if (q != config.acc_queue) reply_topology.queues.emplace_back(q);
  }
  AmqpPublisher amqp_replies(config.amqp, reply_topology, "accounting-replies");
  SigningPublisher replies(amqp_replies, config.keys());
  PaymentConsumer consumer(payments, replies, *store, clock, metrics, options);
  ProcessedPruner pruner(*store, clock, metrics, pruning);
  AccountingServiceImpl service(*store, std::move(auth));
  // Ports first: a process that cannot serve (a port in use) exits before it
  // consumes, and books, a single payment.
  ASSIGN_OR_RETURN(auto serving, Serving::Start(listen, {&service},
                                                absl::GetFlag(FLAGS_metrics_listen), metrics,
                                                config.tls));
  consumer.Start();
  if (pruning.retention > absl::ZeroDuration()) pruner.Start();
  LogInfo("accounting_service_started",
          {KV("listen", listen), KV("port", serving->port()),
           KV("db", absl::GetFlag(FLAGS_accounting_db)), KV("queue", options.pay_queue),
           KV("shard", absl::StrCat(shard, "/", config.accounting_shards)),
           KV("amqp", config.amqp.Redacted()),
           KV("message_signing", config.message_signing()),
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

}  // namespace
}  // namespace outbox::accounting

int main(int argc, char** argv) {
  return outbox::RunServiceMain(argc, argv, "accounting_service",
                                "Books one voucher per payment from PAY_QUEUE and replies to each message.",
                                outbox::accounting::Run);
}
