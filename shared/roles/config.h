#pragma once

// One options block per process: the broker, the signing keys, the queue,
// the retry policy and the producer's file are named once, and each role's
// options are derived from it (ProducerOptionsOf, ConsumerOptionsOf,
// RecoveryOptionsOf). Producer::Start(config) opens the file, and runs
// recovery in the same process with its lease unless recovery_in_process is
// false, so that one process is a complete producer.
//
//   outbox::Config config;
//   config.amqp = url;
//   config.signing = signing;
//   config.queue = "shop.orders";
//   config.db = "shop.db";
//   config.schema = &ShopSchema();  // the shop's tables and the outbox's
//   OUTBOX_ASSIGN_OR_RETURN(auto producer, outbox::Producer::Start(config));
//   OUTBOX_ASSIGN_OR_RETURN(auto consumer, outbox::Consumer::Start(shipping, config));
#include <string>

#include "shared/amqp/amqp_url.h"
#include "shared/base/clock.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/retry_policy.h"
#include "shared/outbox/signing.h"
#include "shared/roles/consumer.h"
#include "shared/roles/producer.h"
#include "shared/roles/recovery.h"
#include "shared/sqlite/internal/db_options.h"
#include "shared/sqlite/schema.h"

namespace outbox {

struct Config {
  AmqpUrl amqp;  // the broker, for every role
  // Required: Signing::With(keys), Signing::FromKeyFile(path), or
  // Signing::Unsigned() by name; every role signs and checks with it.
  Signing signing;
  // Required: the producer's queue, the one its consumer reads.
  std::string queue;
  std::string reply_queue;  // "": DefaultReplyQueue(queue), "<queue>.replies"
  // Stamped on each row by the producer, applied by recovery: stated once.
  RetryPolicy retry;
  // The producer's file: Producer::Start(config) opens it and brings it to
  // `schema`; recovery opens it as that producer made it.
  std::string db;
  const DbSchema* schema = nullptr;  // the adopter's tables and CreateOutboxTable's
  DbOptions db_options;              // durability and busy timeout of the file's connections
  // Producer::Start(config) also runs the recovery role on the file. Its
  // lease lets any number of producer processes share one file: one of them
  // re-publishes at a time. False: recovery runs elsewhere (Recovery::Start).
  bool recovery_in_process = true;
  // The lease holder's name; "": "<queue>-<host name>-<process id>".
  std::string instance_id;
  // Runs inside the transaction that closes a row, SENT or FAILED, under a
  // savepoint: mark the business record confirmed, or failed, with it
  // (RowClosed, outbox_table.h). The producer's and recovery's.
  RowClosed on_closed;
  const Clock* clock = nullptr;        // null: the system clock
  MetricsRegistry* metrics = nullptr;  // null: a registry of each role's own
  // Each role's other settings, with the role's defaults; the fields above
  // replace the ones these repeat.
  Producer::Options producer;  // the group commit, the relay's window, crash points
  Consumer::Options consumer;  // prefetch, linger, inbox_retention
  Recovery::Options recovery;  // the loop's settings (recovery.recovery), alerts, the sweep
};

Producer::Options ProducerOptionsOf(const Config& config);
Consumer::Options ConsumerOptionsOf(const Config& config);
// Opens config.db with config.schema unless recovery.producer_db names a
// schema; instance_id: recovery.recovery.instance_id, else config's, else
// "<queue>-<host name>-<process id>".
Recovery::Options RecoveryOptionsOf(const Config& config);

}  // namespace outbox
