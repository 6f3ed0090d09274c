#pragma once

// The settings every service shares, as one plain struct: the broker, the
// queues, SQLite durability, the retry policy and the alert sink. The flags
// that fill it (service_kit/service_flags.h) are compiled into each service
// binary, not into this library.
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "service_kit/grpc/server_security.h"
#include "service_kit/money.h"
#include "service_kit/topology.h"
#include "shared/amqp/internal/amqp_client.h"
#include "shared/outbox/message_auth.h"
#include "shared/outbox/retry_policy.h"
#include "shared/sqlite/sqlite_file.h"

namespace outbox {

struct ServiceConfig {
  AmqpUrl amqp;
  std::string pay_queue;   // payment events: payment and recovery publish, accounting consumes
  std::string acc_queue;   // acknowledgements: accounting replies, payment consumes
  std::string queue_type;  // x-queue-type of declared queues ("" = classic, "quorum")
  // M, the accounting instances (docs/deployment.md, Accounting shards). 1: accounting
  // consumes pay_queue itself, as always. More: pay_queue is a group of M
  // queues "<pay_queue>-<k>", and the consistent-hash exchange
  // PaymentShardsExchange() sends each payment to one of them by its id.
  int accounting_shards = 1;
  DbOptions db;
  RetryPolicy retry;  // payment writes attempt 1 and the budget; recovery the rest
  std::string alertmanager_url;
  int64_t max_amount_minor = kDefaultMaxAmountMinor;  // the same bound on both sides
  TlsServerFiles tls;  // the gRPC server's TLS files; none = plaintext
  // Signs what the service sends and checks what it receives; none only with
  // --allow_unsigned_messages.
  std::optional<MessageKeys> message_keys;
  const MessageKeys* keys() const { return message_keys ? &*message_keys : nullptr; }

  // For the start line: "key <id> (accepts <ids>)" or "off".
  std::string message_signing() const;

  // Each queue is declared and bound by the side that writes it: payment
  // declares PAY_QUEUE and publishes through kPaymentsExchange, accounting
  // declares ACC_QUEUE and replies through kRepliesExchange. Consumers and
  // recovery declare nothing (their broker users may not).
  // With M > 1 payment also declares the hash exchange and its bindings.
  Topology payment_events() const;
  Topology replies() const { return {{acc_queue}, queue_type, kRepliesExchange}; }

  // The queue accounting shard `shard` (0..M-1) consumes, and all M of them
  // (what recovery watches and re-drives dead letters to).
  std::string payment_event_queue(int shard) const;
  std::vector<std::string> payment_event_queues() const;
};

// The x-consistent-hash exchange of a sharded pay_queue, "<pay_queue>.hash":
// one per queue group, so that several deployments can share a broker, and a
// name no queue-name regex of scripts/lib/broker_users.sh matches (with
// "outbox.payments.hash.<pay_queue>", the dotted prefixes the node script
// allows in queue names gave accounting read, so bind, on it).
std::string PaymentShardsExchange(const std::string& pay_queue);
// "<pay_queue>-<shard>"; pay_queue itself when there is one shard.
std::string PaymentShardQueue(const std::string& pay_queue, int shard, int shards);
inline constexpr int kMaxAccountingShards = 64;

// The token in `path` (the value of --<flag>) as a handler check; an empty
// path = no check. INVALID_ARGUMENT for an unreadable or empty file; a file
// every user can read is started with, after a warning line (never the
// token).
absl::StatusOr<BearerTokenCheck> LoadBearerToken(const std::string& path, const std::string& flag);

}  // namespace outbox
