#pragma once

// The consumer half of the pattern: takes a queue's deliveries in batches,
// checks each one's signature, has the adopter decode them and apply the
// batch in ONE transaction of the adopter's store (the business change and
// each message id in its inbox together), answers every message, new or
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
// unless it was applied before (AppliedBefore): a message already applied is
// answered as applied, whatever today's rules say. Anything else that fails
// (the store refused the transaction, the reply connection went) sends the deliveries back to the
// queue; they come again, are found in the inbox, and are answered again as duplicates.
//
// The adopter implements MessageHandler<M> (decode, apply, answer) and
// keeps processed ids as long as a copy can still arrive (inbox.h).
#include <cstddef>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "shared/base/clock.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/confirm_window.h"
#include "shared/outbox/message.h"
#include "shared/outbox/message_auth.h"
#include "shared/outbox/transport.h"
#include "shared/runtime/worker_thread.h"

namespace outbox {

// What the adopter's store did with one message of a batch.
struct Applied {
  // True: seen before (its id is in the inbox); nothing new was written and
  // `reference` names what the first copy made.
  bool duplicate = false;
  std::string reference;  // the adopter's id of what it made (a shipment, an invoice)
  // Not empty: a business reject (MessageHandler::Rejects); nothing was
  // written for the message. Its reply must say so, with this reason.
  std::string rejected_reason;
  // Not empty: refused by Rejects, new, and its publisher does not
  // understand business rejects (MessageHandler::AnswersRejects): the
  // delivery is dead-lettered with this reason instead of answered.
  std::string dead_letter_reason;
};

// One reply and the messages of the batch it answers (their indexes).
struct Reply {
  OutgoingMessage message;  // its topic is the reply queue
  std::vector<size_t> answers;
};

// The type-erased side the consumer drives; implement MessageHandler<M>.
class ConsumerHandler {
 public:
  virtual ~ConsumerHandler() = default;
  // A new batch: forget the last one's messages.
  virtual void Clear() = 0;
  // Decodes and checks one delivery (its signature is checked already) and
  // keeps it as the batch's next message. An error keeps nothing: the
  // delivery is dead-lettered with the error's message as the reason.
  virtual absl::Status Add(const Delivery& delivery) = 0;
  // Applies what Add kept, in one transaction: one Applied each, in order.
  virtual absl::StatusOr<std::vector<Applied>> Apply() = 0;
  // The replies to the applied batch; `reply_to[i]` is where message i's
  // reply goes (its delivery's reply_to, or the consumer's default).
  virtual std::vector<Reply> Answer(const std::vector<Applied>& applied,
                                    const std::vector<std::string>& reply_to) = 0;
};

// One message of an applied batch, as Answer sees it.
template <typename Message>
struct Answered {
  const Message& message;
  const Delivery& delivery;
  const Applied& applied;
  const std::string& reply_to;
};

// What the adopter writes: three functions over its own message type.
template <typename Message>
class MessageHandler : public ConsumerHandler {
 public:
  // The message in `delivery`, checked; an error dead-letters it (say why).
  virtual absl::StatusOr<Message> Decode(const Delivery& delivery) = 0;
  // Why the business will never accept this well-formed message ("" = it
  // may): unless AppliedBefore finds it, it is not applied and is answered
  // with a business reject. A reject is not kept in the inbox: a copy is
  // judged again. Only answer rejects to publishers that understand them
  // (docs/library.md, "Business rejects"); for the others, AnswersRejects
  // returns false and the message is dead-lettered instead.
  virtual std::string Rejects(const Message& message) {
    (void)message;
    return "";
  }
  // Whether `message`'s publisher understands business rejects. False: a
  // new message that Rejects refuses is dead-lettered with the reason.
  virtual bool AnswersRejects(const Message& message) {
    (void)message;
    return true;
  }
  // For messages Rejects refuses: whether each was applied before, with the
  // reference ApplyBatch reported for it (nullopt: new), in order. Reads
  // only. A message already applied is answered as applied (a duplicate)
  // whatever today's rules say: the rules may have been tightened since it
  // was applied, and its publisher must not be told it never was. Called
  // only when Rejects refuses something, so a handler that never rejects
  // need not write it; the default fails, and the batch goes back to the
  // queue. An error sends the batch back to the queue.
  virtual absl::StatusOr<std::vector<std::optional<std::string>>> AppliedBefore(
      const std::vector<Message>& messages) {
    (void)messages;
    return absl::UnimplementedError(
        "the handler's Rejects refused a message, but it does not implement AppliedBefore: "
        "it cannot tell a message applied before from a new one");
  }
  // Applies `batch` in ONE transaction of the adopter's store, recording
  // each message id in the inbox with the change it causes: a message id
  // seen before changes nothing and is reported as a duplicate. An error
  // means nothing was applied.
  virtual absl::StatusOr<std::vector<Applied>> ApplyBatch(const std::vector<Message>& batch) = 0;
  // The replies, each message answered by exactly one of them (one reply
  // per message, or one listing several messages of the same reply queue).
  virtual std::vector<Reply> Replies(const std::vector<Answered<Message>>& batch) = 0;

 private:
  void Clear() final {
    messages_.clear();
    deliveries_.clear();
    rejects_.clear();
  }
  absl::Status Add(const Delivery& delivery) final {
    absl::StatusOr<Message> m = Decode(delivery);
    if (!m.ok()) return m.status();
    rejects_.push_back(Rejects(*m));
    messages_.push_back(std::move(m).value());
    deliveries_.push_back(&delivery);
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<Applied>> Apply() final {
    std::vector<Message> accepted;
    std::vector<Message> refused;
    for (size_t i = 0; i < messages_.size(); ++i) {
      (rejects_[i].empty() ? accepted : refused).push_back(messages_[i]);
    }
    if (refused.empty()) return ApplyBatch(messages_);
    // Judged after the inbox: a refused message applied before is answered
    // as applied.
    absl::StatusOr<std::vector<std::optional<std::string>>> before = AppliedBefore(refused);
    if (!before.ok()) return before.status();
    if (before->size() != refused.size()) {
      return absl::InternalError(
          absl::StrCat("AppliedBefore answered ", before->size(), " messages of ", refused.size()));
    }
    std::vector<Applied> applied_accepted;
    if (!accepted.empty()) {
      absl::StatusOr<std::vector<Applied>> a = ApplyBatch(accepted);
      if (!a.ok()) return a.status();
      applied_accepted = std::move(a).value();
    }
    std::vector<Applied> applied(messages_.size());
    for (size_t i = 0, next = 0, next_refused = 0; i < messages_.size(); ++i) {
      if (rejects_[i].empty()) {
        applied[i] = std::move(applied_accepted.at(next++));
      } else if (std::optional<std::string>& reference = before->at(next_refused++)) {
        applied[i].duplicate = true;
        applied[i].reference = std::move(*reference);
      } else if (AnswersRejects(messages_[i])) {
        applied[i].rejected_reason = rejects_[i];
      } else {
        applied[i].dead_letter_reason = rejects_[i];
      }
    }
    return applied;
  }
  std::vector<Reply> Answer(const std::vector<Applied>& applied,
                            const std::vector<std::string>& reply_to) final {
    std::vector<Answered<Message>> batch;
    std::vector<size_t> index_of;  // batch[k] is message index_of[k]
    batch.reserve(messages_.size());
    for (size_t i = 0; i < messages_.size(); ++i) {
      if (!applied[i].dead_letter_reason.empty()) continue;  // dead-lettered, not answered
      batch.push_back({messages_[i], *deliveries_[i], applied[i], reply_to[i]});
      index_of.push_back(i);
    }
    std::vector<Reply> replies = Replies(batch);
    for (Reply& r : replies) {
      for (size_t& k : r.answers) k = index_of.at(k);
    }
    return replies;
  }

  std::vector<Message> messages_;
  std::vector<const Delivery*> deliveries_;
  std::vector<std::string> rejects_;  // per message: "" or the reject's reason
};

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
  // Messages must be signed by one of these keys; null = unsigned accepted.
  // (Replies are signed by the publisher given: a SigningPublisher.)
  const MessageKeys* keys = nullptr;
  // The counters of booked messages and of duplicates (name, help).
  std::string booked_metric = "outbox_consumer_booked_total";
  std::string booked_help = "messages applied";
  std::string duplicates_metric = "outbox_duplicates_total";
  std::string rejected_metric = "outbox_consumer_rejected_total";
  // Crash points (shared/runtime/failpoint.h) for crash tests; empty: none.
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
    uint64_t last_tag = 0;  // the last admitted (dead-lettered tags are settled already)
  };
  // A delivery whose reply is published and not yet settled.
  struct Unsettled {
    Delivery delivery;
    std::string reply_queue;
    enum class State { kWaiting, kConfirmed, kUnroutable, kNotConfirmed } state = State::kWaiting;
  };

  absl::Status HandleBatch(const std::vector<Delivery>& deliveries);
  // Checks each delivery's signature, body and reply queue; what fails is
  // dead-lettered, the rest admitted. An error only from the broker.
  absl::Status Admit(const std::vector<Delivery>& deliveries, Admitted* batch);
  // Small batches wait up to options_.linger for more (see ConsumerOptions).
  absl::StatusOr<std::vector<Delivery>> Linger(std::vector<Delivery> batch);
  // The batch could not be applied: it goes back to the queue, with the
  // earlier deliveries still waiting for their replies' confirms.
  absl::Status RequeueBatch(const Admitted& batch, const absl::Status& why);
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
  // The delivery connection is gone: the broker requeues what was unacked.
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
  Counter& apply_failures_;  // batch transactions the store refused
  std::set<std::string> known_reply_queues_;
  // Owned by the consumer thread: by delivery tag, and reply tag -> the
  // delivery tags it answers.
  std::map<uint64_t, Unsettled> unsettled_;
  ConfirmWindow<std::vector<uint64_t>> window_;
  WorkerThread thread_;
};

}  // namespace outbox
