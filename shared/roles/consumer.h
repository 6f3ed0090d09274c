#pragma once

// The consumer role in one call: an IdempotentConsumer reading `queue` on a
// broker connection of its own and answering on another, over the
// adopter's handler, typically a SqliteMessageHandler<M>
// (shared/sqlite/sqlite_message_handler.h: the library owns the batch's
// transaction and the inbox step, the adopter writes Decode and Apply, and
// every message is answered in the library's reply format, the one the
// producer role reads). Deliveries are checked, and replies signed, with the
// process's Signing, which must be chosen (keys, or Signing::Unsigned()).
//
//   Shipping shipping(*file, clock);  // a SqliteMessageHandler<OrderPlaced>
//   outbox::Consumer::Options options;
//   options.amqp = url;
//   options.queue = "shop.orders";
//   options.signing = signing;
//   OUTBOX_ASSIGN_OR_RETURN(auto consumer, outbox::Consumer::Start(shipping, options));
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shared/amqp/amqp_url.h"
#include "shared/amqp/internal/amqp_client.h"
#include "shared/base/clock.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/consumer_handler.h"
#include "shared/outbox/internal/idempotent_consumer.h"
#include "shared/outbox/internal/inbox_pruner.h"
#include "shared/outbox/message_auth.h"
#include "shared/outbox/signing.h"
#include "shared/outbox/transport.h"

namespace outbox {

struct Config;  // config.h

class Consumer {
 public:
  struct Options {
    AmqpUrl amqp;  // the broker (Start); Create takes the links instead
    // Required: the queue consumed. Its connection declares it, unless `topology` is set.
    std::string queue;
    // Where a message without a reply_to is answered; the reply
    // connection declares it. "": DefaultReplyQueue(queue).
    std::string reply_queue;
    // What the deliveries' connection declares; unset: `queue` alone, Topology{}: nothing.
    std::optional<Topology> topology;
    // What the reply connection declares (reply_queue among it) and publishes through; unset:
    // `reply_queue` alone.
    std::optional<Topology> reply_topology;
    // Required: Signing::With(keys), Signing::FromKeyFile(path), or
    // Signing::Unsigned() by name. Unchosen, Start and Create fail.
    Signing signing;
    std::string name = "consumer";  // connections "<name>" and "<name>-replies"
    int prefetch = 256;             // most deliveries in one batch (one transaction)
    // A batch smaller than linger_batch waits this long since its first
    // delivery for more, so that messages arriving close together share one
    // transaction and one reply confirm. Zero: no wait.
    absl::Duration linger = absl::ZeroDuration();
    int linger_batch = 4;                               // a batch this big is taken at once
    absl::Duration confirm_timeout = absl::Seconds(5);  // a reply unconfirmed this long: requeued
    // Processed ids older than this (30 days) are deleted from the handler's
    // inbox by a thread of the consumer's own (ProcessedPruner,
    // inbox_pruner.h), so that it stays bounded. Keep them as long as a copy
    // can still arrive: recovery's whole retry window, plus however long an
    // operator may wait before re-driving a FAILED row; a copy that comes
    // after its id was pruned is applied again unless applied_by_key finds
    // it. Zero: keep every id. A handler without the library's inbox
    // (processed_log() null) prunes its own.
    absl::Duration inbox_retention = absl::Hours(720);
    std::string booked_metric;  // the applied messages' counter; "": outbox_consumer_booked_total
    std::string booked_help;    // its help; "": "messages applied"
    // A crash point (shared/runtime/internal/failpoint.h) once a batch is committed, before its
    // replies.
    std::string after_apply_failpoint;
    // One once the replies are confirmed, before the deliveries are acked.
    std::string before_ack_failpoint;
    const Clock* clock = nullptr;        // null: the system clock
    MetricsRegistry* metrics = nullptr;  // null: a registry of the consumer's own
  };

  // Builds the consumer over `handler` (which outlives it) with its own AMQP
  // connections, and starts it. INVALID_ARGUMENT or FAILED_PRECONDITION (no
  // signing chosen) naming the setting.
  static absl::StatusOr<std::unique_ptr<Consumer>> Start(ConsumerHandler& handler, Options options);
  // The same from the process's one options block (config.h):
  // Start(handler, ConsumerOptionsOf(config)).
  static absl::StatusOr<std::unique_ptr<Consumer>> Start(ConsumerHandler& handler,
                                                         const Config& config);
  // The same over broker links of the caller's (a test's fakes), not
  // started: StartWorkers(), or drive it with Step().
  static absl::StatusOr<std::unique_ptr<Consumer>> Create(
      ConsumerHandler& handler, Options options, std::unique_ptr<MessageConsumer> deliveries,
      std::unique_ptr<MessagePublisher> replies);
  ~Consumer();  // Stop()

  // The consumer's thread, and the inbox pruner's (Start calls it).
  void StartWorkers();
  // Finishes the batch in hand, waits for its replies' confirms, acks; then
  // stops the pruner.
  void Stop();
  bool Step() { return consumer_.Step(); }  // one turn; tests call it
  // One pass of the inbox's pruning: the ids deleted (0 when nothing is
  // pruned). Tests call it.
  absl::StatusOr<int64_t> PruneStep();

  const Options& options() const { return options_; }
  int64_t booked() const { return consumer_.booked(); }  // new messages applied
  int64_t duplicates() const { return consumer_.duplicates(); }
  int64_t rejected() const { return consumer_.rejected(); }
  int64_t dead_lettered() const { return consumer_.dead_lettered(); }
  int64_t unauthenticated() const { return consumer_.unauthenticated(); }
  int64_t requeued() const { return consumer_.requeued(); }

 private:
  Consumer(ConsumerHandler& handler, Options options, std::unique_ptr<MessageConsumer> deliveries,
           std::unique_ptr<MessagePublisher> replies);

  const Options options_;
  std::unique_ptr<MetricsRegistry> own_metrics_;
  std::unique_ptr<MessageConsumer> deliveries_;
  std::unique_ptr<MessagePublisher> replies_;
  SigningPublisher signing_replies_;
  IdempotentConsumer consumer_;
  std::unique_ptr<ProcessedPruner> pruner_;  // null: nothing to prune
};

}  // namespace outbox
