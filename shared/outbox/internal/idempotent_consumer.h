#pragma once

// The consumer half of the pattern: takes a queue's deliveries in batches,
// checks each one's signature, has its handler decode them and apply the
// batch in ONE transaction of the adopter's store (each new message's
// change and its id in the inbox together), answers every message, new or
// duplicate, on its reply_to through a confirm window, and acks each
// delivery only once the reply that answers it is confirmed (`multiple` over
// the settled prefix). The next batch is taken and applied while the last
// one's confirms are on their way.
//
// What cannot ever be processed is dead-lettered at once: a missing or
// wrong signature, a body the adopter cannot decode, a reply_to that names
// no queue. A message that is well formed but that the adopter's business
// rules will never accept (Rejects) is answered with a business reject
// instead: its publisher closes the row FAILED at once, with the reason;
// unless it was applied before: a message already applied is answered as
// applied, whatever today's rules say.
//
// A batch the store cannot write at all (StoreUnavailable, dead_letter.h:
// a lock held too long, a full disk, an I/O error) is kept, unacked, and
// applied again after a pause that doubles from 200 ms up to
// `store_retry_max`, with whatever arrives meanwhile; the connections stay
// alive through the wait. It is not sent back to the queue: a returned
// message spends one of its deliveries, and RabbitMQ 4.0 dead-letters a
// quorum queue's message after 20 of them (its default delivery limit), so
// requeueing through a store outage would dead-letter every message in
// flight within seconds. Only a lost connection or a reply the broker did
// not confirm sends deliveries back; they come again, are found in the
// inbox, and are answered again as duplicates.
//
// A batch refused with any other error (a constraint, a missing table, the
// adopter's Apply failing or throwing) would be refused again: its messages
// are applied one at a time, each in its own transaction; the one refused is
// dead-lettered with the error as the reason, and the others are applied and
// answered. An exception from the adopter's code never ends the process: one
// thrown while decoding dead-letters the message, one while applying is an
// error as above, and one while making the replies answers each message
// alone (a message whose reply cannot be made is dead-lettered; its change
// stands, and its publisher re-publishes it).
//
// The handler is the library's SqliteMessageHandler<M>
// (shared/sqlite/sqlite_message_handler.h: the inbox step and the
// transaction), over the adopter's decode, apply-one-message and answer;
// the adopter keeps processed ids as long as a copy can still arrive
// (inbox_pruner.h).
#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shared/base/clock.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/consumer_handler.h"
#include "shared/outbox/internal/confirm_window.h"
#include "shared/outbox/internal/store_backoff.h"
#include "shared/outbox/message.h"
#include "shared/outbox/message_auth.h"
#include "shared/outbox/transport.h"
#include "shared/runtime/internal/worker_thread.h"

namespace outbox {

struct ConsumerOptions {
  std::string queue;             // the queue consumed, for logs, metrics and dead letters
  std::string default_reply_to;  // replies for messages without reply_to
  int prefetch = 256;            // most deliveries in one batch
  // At low rates each message would be its own transaction, reply and
  // fsync. A batch waits until it holds `linger_batch` deliveries or
  // `linger` has passed since its first, so that messages arriving close
  // together share them; a batch that starts that big (a backlog, a
  // saturated queue) is taken at once. Zero: no wait.
  absl::Duration linger = absl::ZeroDuration();
  int linger_batch = 4;
  absl::Duration confirm_timeout = absl::Seconds(5);  // a reply unconfirmed this long: requeued
  // The longest pause before a batch the store refused is applied again
  // (the pause doubles from 200 ms to it while the store keeps failing).
  absl::Duration store_retry_max = absl::Seconds(5);
  // Messages must be signed by one of these keys; null = unsigned accepted.
  // (Replies are signed by the publisher given: a SigningPublisher.)
  const MessageKeys* keys = nullptr;
  // The counters of booked messages and of duplicates (name, help).
  std::string booked_metric = "outbox_consumer_booked_total";
  std::string booked_help = "messages applied";
  std::string duplicates_metric = "outbox_duplicates_total";
  std::string rejected_metric = "outbox_consumer_rejected_total";
  // Crash points (shared/runtime/internal/failpoint.h) for crash tests; empty: none.
  std::string after_apply_failpoint;  // the batch is committed, no reply sent
  std::string before_ack_failpoint;   // replies confirmed, deliveries not acked
};

class IdempotentConsumer {
 public:
  // `deliveries` reads options.queue; `replies` publishes the answers.
  IdempotentConsumer(MessageConsumer& deliveries, MessagePublisher& replies,
                     ConsumerHandler& handler, const Clock& clock, MetricsRegistry& metrics,
                     ConsumerOptions options);
  ~IdempotentConsumer();

  void Start();  // a thread of its own runs Step()
  void Stop();   // finishes the batch in hand and waits for its replies' confirms, then stops

  // One turn: connect both sides if needed, take a batch and settle it.
  // False once stopping. Tests call it directly.
  bool Step();

  int64_t booked() const { return booked_.value(); }
  int64_t duplicates() const { return duplicates_.value(); }
  int64_t rejected() const { return rejected_.value(); }
  int64_t dead_lettered() const { return dead_lettered_.value(); }
  int64_t unauthenticated() const { return unauthenticated_.value(); }
  int64_t requeued() const { return requeued_.value(); }
  int64_t lingers() const { return lingers_.value(); }

 private:
  // The deliveries of one batch that passed every check, in order.
  struct Admitted {
    std::vector<const Delivery*> sources;
    std::vector<std::string> reply_to;
  };
  // A delivery whose reply is published and not yet settled.
  struct Unsettled {
    Delivery delivery;
    std::string reply_queue;
    enum class State { kWaiting, kConfirmed, kUnroutable, kNotConfirmed } state = State::kWaiting;
  };

  absl::Status HandleBatch(const std::vector<Delivery>& deliveries);
  // The handler's ApplyBatch for what Add kept: one Applied per admitted
  // delivery, or the error (an exception thrown is one).
  absl::StatusOr<std::vector<Applied>> ApplyAdmitted(const Admitted& batch);
  // A batch refused for a reason other than the store's outage: each
  // message applied alone, the one refused dead-lettered.
  absl::Status ApplyOneByOne(const Admitted& batch, const absl::Status& why);
  // The applied batch: dead letters, counters, replies.
  absl::Status Answer(const Admitted& batch, const std::vector<Applied>& applied);
  absl::StatusOr<std::vector<Reply>> Replies(const std::vector<Applied>& applied,
                                             const std::vector<std::string>& reply_to);
  // A step failed: a lost connection drops what it held (the broker
  // requeues it).
  void AfterError(const absl::Status& s);
  // Checks each delivery's signature, body and reply queue; what fails is
  // dead-lettered, the rest admitted. An error only from the broker.
  absl::Status Admit(const std::vector<Delivery>& deliveries, Admitted* batch);
  // Small batches wait up to options_.linger for more (see ConsumerOptions).
  absl::StatusOr<std::vector<Delivery>> Linger(std::vector<Delivery> batch);
  // The store cannot write: the deliveries wait for the next try (StoreBackoff).
  absl::Status BackOff(const std::vector<const Delivery*>& deliveries, const absl::Status& why);
  // The waiting batch, with what arrived meanwhile, once the backoff is over.
  absl::Status RetryWaiting();
  // Publishes the replies into the confirm window; their deliveries wait.
  absl::Status PublishReplies(const Admitted& batch, const std::vector<Reply>& replies);
  void Track(const Admitted& batch, const Reply& reply);
  // NOT_FOUND when `queue` (a reply_to) does not exist: the message is
  // poison and is dead-lettered before anything is applied. Queues seen to
  // exist are remembered; any other answer lets the message through (a
  // reply that cannot be routed is still caught when it is published).
  absl::Status CheckReplyQueue(const std::string& queue);
  // Reads the confirms that came (waiting up to `wait`), then acks,
  // requeues or dead-letters the deliveries whose replies are all answered.
  absl::Status Settle(absl::Duration wait);
  absl::Status SettleAnswered();
  // The reply connection failed: every delivery still waiting goes back.
  absl::Status FailReplies(const absl::Status& why);
  // The delivery connection is gone: the broker requeues what was unacked
  // (the held batch too).
  void ForgetUnsettled();

  MessageConsumer& deliveries_;
  MessagePublisher& replies_;
  ConsumerHandler& handler_;
  const Clock& clock_;
  const ConsumerOptions options_;
  Counter& booked_;
  Counter& duplicates_;  // messages seen before, answered again
  Counter& rejected_;    // answered with a business reject
  Counter& dead_lettered_;
  Counter& unauthenticated_;  // of those, missing or bad signatures
  Counter& lingers_;          // small batches that waited for more
  Counter& requeued_;
  Counter& apply_failures_;  // batch transactions the store could not write (held)
  std::set<std::string> known_reply_queues_;
  // Owned by the consumer thread: by delivery tag, and reply tag -> the
  // delivery tags it answers.
  std::map<uint64_t, Unsettled> unsettled_;
  ConfirmWindow<std::vector<uint64_t>> window_;
  // A batch the store could not write, unacked, with what arrived since: applied
  // again when the backoff is over.
  std::vector<Delivery> waiting_;
  StoreBackoff backoff_;
  WorkerThread thread_;
};

}  // namespace outbox
