#include "shared/outbox/internal/idempotent_consumer.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/observability/log.h"
#include "shared/outbox/internal/dead_letter.h"
#include "shared/outbox/repository.h"
#include "shared/runtime/internal/failpoint.h"

namespace outbox {

IdempotentConsumer::IdempotentConsumer(MessageConsumer& deliveries, MessagePublisher& replies,
                                       ConsumerHandler& handler, const Clock& clock,
                                       MetricsRegistry& metrics, ConsumerOptions options)
    : deliveries_(deliveries),
      replies_(replies),
      handler_(handler),
      clock_(clock),
      options_(std::move(options)),
      booked_(metrics.AddCounter(options_.booked_metric, options_.booked_help)),
      duplicates_(
          metrics.AddCounter(options_.duplicates_metric, "messages seen before, replied to again")),
      rejected_(
          metrics.AddCounter(options_.rejected_metric, "messages answered with a business reject")),
      dead_lettered_(DeadLetteredCounter(metrics, options_.queue)),
      unauthenticated_(UnauthenticatedCounter(metrics, options_.queue)),
      lingers_(
          metrics.AddCounter("outbox_consumer_lingers_total",
                             "small batches that waited (up to the linger) for more messages")),
      requeued_(metrics.AddCounter("outbox_requeued_total",
                                   "deliveries returned to the queue after a failure")),
      apply_failures_(StoreWriteFailures(metrics, "apply_batch")),
      backoff_(clock_, options_.store_retry_max) {
  RegisterLinkMetrics(metrics, deliveries_, "consumer");
  RegisterLinkMetrics(metrics, replies_, "replies");
}

IdempotentConsumer::~IdempotentConsumer() {
  Stop();
}

void IdempotentConsumer::Start() {
  thread_.Start([this] { return Step(); });
}

void IdempotentConsumer::Stop() {
  thread_.Stop();
}

bool IdempotentConsumer::Step() {
  if (thread_.stopping()) {
    // The batch in hand is booked and replied to: wait for its confirms and
    // ack it, so a clean stop leaves nothing to redeliver.
    while (!window_.empty() && replies_.connected() && deliveries_.connected()) {
      if (!Settle(absl::Milliseconds(20)).ok()) break;
    }
    return false;
  }
  // Take deliveries only while replies can be sent.
  absl::Status up = replies_.Connect();
  if (up.ok()) up = deliveries_.Connect();
  if (!up.ok()) {
    thread_.Sleep(absl::Milliseconds(100));
    return true;
  }
  if (!waiting_.empty()) {
    absl::Status s = RetryWaiting();
    if (!s.ok()) AfterError(s);
    return true;
  }
  // With replies in flight, take only what is already waiting: their
  // confirms are read right after.
  const bool in_flight = !window_.empty();
  auto deliveries = deliveries_.Next(options_.prefetch,
                                     in_flight ? absl::ZeroDuration() : absl::Milliseconds(200));
  if (deliveries.ok() && !in_flight) deliveries = Linger(*std::move(deliveries));
  if (!deliveries.ok()) {
    deliveries_.Reset(deliveries.status());
    ForgetUnsettled();
    return true;
  }
  absl::Status s;
  if (!deliveries->empty()) {
    s = HandleBatch(*deliveries);
  } else if (in_flight) {
    s = Settle(absl::Milliseconds(20));
  } else {
    s = replies_.Poll(absl::Milliseconds(1));  // notice a closed reply connection
    if (!s.ok()) replies_.Reset(s);
    return true;
  }
  if (!s.ok()) AfterError(s);
  return true;
}

void IdempotentConsumer::AfterError(const absl::Status& s) {
  // Unacked deliveries return to the queue when the connection goes.
  if (!deliveries_.connected()) {
    deliveries_.Reset(s);
    ForgetUnsettled();
  }
  if (!replies_.connected()) replies_.Reset(s);
}

absl::Status IdempotentConsumer::RetryWaiting() {
  // Waiting on the connection keeps it alive (heartbeats) and takes what
  // else arrives, up to the prefetch.
  const size_t prefetch = static_cast<size_t>(options_.prefetch);
  ASSIGN_OR_RETURN(std::vector<Delivery> more,
                   deliveries_.Next(waiting_.size() < prefetch ? prefetch - waiting_.size() : 1,
                                    backoff_.WaitNow()));
  waiting_.insert(waiting_.end(), std::make_move_iterator(more.begin()),
                  std::make_move_iterator(more.end()));
  if (!window_.empty()) RETURN_IF_ERROR(Settle(absl::ZeroDuration()));
  if (!backoff_.Due()) return absl::OkStatus();
  std::vector<Delivery> batch;
  batch.swap(waiting_);
  return HandleBatch(batch);
}

absl::StatusOr<std::vector<Delivery>> IdempotentConsumer::Linger(std::vector<Delivery> batch) {
  const size_t max = static_cast<size_t>(std::min(options_.linger_batch, options_.prefetch));
  if (batch.empty() || batch.size() >= max || options_.linger <= absl::ZeroDuration()) {
    return batch;
  }
  // A real wait on the connection, so real time (not the injected clock).
  const absl::Time until = absl::Now() + options_.linger;
  lingers_.Add();
  for (absl::Time now = absl::Now(); batch.size() < max && now < until; now = absl::Now()) {
    ASSIGN_OR_RETURN(std::vector<Delivery> more, deliveries_.Next(max - batch.size(), until - now));
    if (more.empty()) return batch;  // the wait ran out
    batch.insert(batch.end(), std::make_move_iterator(more.begin()),
                 std::make_move_iterator(more.end()));
  }
  // Enough of them: with what else is already waiting, up to the prefetch.
  const size_t prefetch = static_cast<size_t>(options_.prefetch);
  if (batch.size() < prefetch) {
    ASSIGN_OR_RETURN(std::vector<Delivery> rest,
                     deliveries_.Next(prefetch - batch.size(), absl::ZeroDuration()));
    batch.insert(batch.end(), std::make_move_iterator(rest.begin()),
                 std::make_move_iterator(rest.end()));
  }
  return batch;
}

absl::Status IdempotentConsumer::CheckReplyQueue(const std::string& queue) {
  if (known_reply_queues_.count(queue)) return absl::OkStatus();
  auto state = replies_.Inspect(queue);
  if (state.ok()) {
    known_reply_queues_.insert(queue);
    return absl::OkStatus();
  }
  return state.status();  // NOT_FOUND leaves the connection usable
}

absl::Status IdempotentConsumer::HandleBatch(const std::vector<Delivery>& deliveries) {
  Admitted batch;
  handler_.Clear();
  RETURN_IF_ERROR(Admit(deliveries, &batch));
  if (batch.sources.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<Applied>> applied = ApplyAdmitted(batch);
  if (applied.ok()) return Answer(batch, *applied);
  if (StoreUnavailable(applied.status())) return BackOff(batch.sources, applied.status());
  return ApplyOneByOne(batch, applied.status());
}

absl::StatusOr<std::vector<Applied>> IdempotentConsumer::ApplyAdmitted(const Admitted& batch) {
  auto applied = CatchThrown("the handler", [&] { return handler_.ApplyBatch(); });
  if (applied.ok() && applied->size() != batch.sources.size()) {
    applied = absl::InternalError(absl::StrCat("the handler applied ", applied->size(),
                                               " messages of ", batch.sources.size()));
  }
  return applied;
}

absl::Status IdempotentConsumer::ApplyOneByOne(const Admitted& batch, const absl::Status& why) {
  // Which message the store refuses is not known: each is applied alone,
  // the one refused is dead-lettered, the others are applied and answered.
  LogWarning("batch_not_applied",
             {KV("queue", options_.queue), KV("messages", batch.sources.size()),
              KV("error", why.message())});
  for (size_t i = 0; i < batch.sources.size(); ++i) {
    const Delivery& d = *batch.sources[i];
    handler_.Clear();
    if (absl::Status decoded = CatchThrown("decoding", [&] { return handler_.Add(d); });
        !decoded.ok()) {
      RETURN_IF_ERROR(DeadLetter(deliveries_, dead_lettered_, options_.queue, d,
                                 std::string(decoded.message())));
      continue;
    }
    Admitted one;
    one.sources.push_back(&d);
    one.reply_to.push_back(batch.reply_to[i]);
    absl::StatusOr<std::vector<Applied>> applied = ApplyAdmitted(one);
    if (applied.ok()) {
      RETURN_IF_ERROR(Answer(one, *applied));
    } else if (StoreUnavailable(applied.status())) {
      // The store went away meanwhile: this one and the rest wait for it.
      return BackOff(std::vector<const Delivery*>(batch.sources.begin() + i, batch.sources.end()),
                     applied.status());
    } else {
      RETURN_IF_ERROR(DeadLetter(deliveries_, dead_lettered_, options_.queue, d,
                                 std::string(applied.status().message())));
    }
  }
  return absl::OkStatus();
}

absl::Status IdempotentConsumer::Answer(const Admitted& batch,
                                        const std::vector<Applied>& applied) {
  backoff_.Succeeded();
  if (!options_.after_apply_failpoint.empty()) Failpoint(options_.after_apply_failpoint);
  for (size_t i = 0; i < applied.size(); ++i) {
    const Applied& a = applied[i];
    if (!a.dead_letter_reason.empty()) {
      // Refused, new, and its publisher understands no reject: nothing was
      // applied for it, and it is not answered.
      RETURN_IF_ERROR(DeadLetter(deliveries_, dead_lettered_, options_.queue, *batch.sources[i],
                                 a.dead_letter_reason));
    } else if (!a.rejected_reason.empty()) {
      rejected_.Add();
    } else {
      a.duplicate ? duplicates_.Add() : booked_.Add();
    }
  }
  // The batch is committed; each delivery is acked only once the reply
  // that answers it is confirmed. Otherwise it is redelivered, found to be a
  // duplicate, and replied to again.
  auto replies = Replies(applied, batch.reply_to);
  if (!replies.ok()) {
    // Replies fail for the whole batch: each message is answered alone, and
    // one whose reply fails alone too is dead-lettered (its change stands;
    // its producer's row waits for a reply and is re-published).
    std::vector<Reply> answered;
    for (size_t i = 0; i < applied.size(); ++i) {
      if (!applied[i].dead_letter_reason.empty()) continue;
      std::vector<Applied> alone = applied;
      for (size_t k = 0; k < alone.size(); ++k) {
        if (k != i) alone[k].dead_letter_reason = "answered apart";
      }
      auto reply = Replies(alone, batch.reply_to);
      if (reply.ok()) {
        answered.insert(answered.end(), reply->begin(), reply->end());
        continue;
      }
      RETURN_IF_ERROR(
          DeadLetter(deliveries_, dead_lettered_, options_.queue, *batch.sources[i],
                     absl::StrCat("applied, but cannot be answered: ", reply.status().message())));
    }
    replies = std::move(answered);
  }
  RETURN_IF_ERROR(PublishReplies(batch, *replies));
  return Settle(absl::ZeroDuration());
}

absl::StatusOr<std::vector<Reply>> IdempotentConsumer::Replies(
    const std::vector<Applied>& applied, const std::vector<std::string>& reply_to) {
  return CatchThrown("the handler's replies", [&]() -> absl::StatusOr<std::vector<Reply>> {
    return handler_.Answer(applied, reply_to);
  });
}

absl::Status IdempotentConsumer::Admit(const std::vector<Delivery>& deliveries, Admitted* batch) {
  for (const Delivery& d : deliveries) {
    // A forged message would make the store change for something that never happened.
    if (absl::Status signature = CheckSignature(options_.keys, d); !signature.ok()) {
      unauthenticated_.Add();
      RETURN_IF_ERROR(DeadLetter(deliveries_, dead_lettered_, options_.queue, d,
                                 std::string(signature.message())));
      continue;
    }
    // Everything about the message is checked before anything is applied:
    // a reply that can never be delivered makes it poison now, not after
    // its change was committed.
    const std::string& reply_to = d.reply_to.empty() ? options_.default_reply_to : d.reply_to;
    if (absl::IsNotFound(CheckReplyQueue(reply_to))) {
      RETURN_IF_ERROR(DeadLetter(deliveries_, dead_lettered_, options_.queue, d,
                                 absl::StrCat("reply_to '", reply_to, "' is not a queue")));
      continue;
    }
    if (absl::Status decoded = CatchThrown("decoding", [&] { return handler_.Add(d); });
        !decoded.ok()) {
      RETURN_IF_ERROR(DeadLetter(deliveries_, dead_lettered_, options_.queue, d,
                                 std::string(decoded.message())));
      continue;
    }
    batch->sources.push_back(&d);
    batch->reply_to.push_back(reply_to);
  }
  return absl::OkStatus();
}

absl::Status IdempotentConsumer::BackOff(const std::vector<const Delivery*>& deliveries,
                                         const absl::Status& why) {
  // Kept, not requeued: a store outage spends none of a message's
  // deliveries (see the header). The earlier batches' replies settle on.
  apply_failures_.Add();
  for (const Delivery* d : deliveries) waiting_.push_back(*d);
  const absl::Duration pause = backoff_.Refused();
  LogWarning("batch_held", {KV("queue", options_.queue), KV("messages", waiting_.size()),
                            KV("retry_in", absl::FormatDuration(pause)),
                            KV("failures", backoff_.failures()), KV("error", why.message())});
  return absl::OkStatus();
}

absl::Status IdempotentConsumer::PublishReplies(const Admitted& batch,
                                                const std::vector<Reply>& replies) {
  const absl::Time sent = clock_.Now();
  for (size_t i = 0; i < replies.size(); ++i) {
    auto tag = replies_.Publish(replies[i].message);
    if (!tag.ok()) {
      // The rest of this batch is not in the window yet: it goes back too.
      for (size_t k = i; k < replies.size(); ++k) Track(batch, replies[k]);
      return FailReplies(tag.status());
    }
    std::vector<uint64_t> answered;
    for (size_t index : replies[i].answers) {
      answered.push_back(batch.sources[index]->delivery_tag);
    }
    window_.Add(*tag, std::move(answered), sent);
    Track(batch, replies[i]);
  }
  return absl::OkStatus();
}

void IdempotentConsumer::Track(const Admitted& batch, const Reply& reply) {
  for (size_t index : reply.answers) {
    const Delivery& d = *batch.sources[index];
    unsettled_.emplace(d.delivery_tag, Unsettled{d, reply.message.topic});
  }
}

absl::Status IdempotentConsumer::Settle(absl::Duration wait) {
  if (window_.empty()) return SettleAnswered();
  std::vector<Confirm> confirms;
  absl::Status s = replies_.ReadConfirms(wait, &confirms);
  if (!s.ok()) return FailReplies(s);
  for (const auto& [delivery_tags, c, sent] : window_.Settle(confirms)) {
    for (uint64_t delivery_tag : delivery_tags) {
      auto it = unsettled_.find(delivery_tag);
      if (it == unsettled_.end()) continue;
      it->second.state = c.ok           ? Unsettled::State::kConfirmed
                         : c.unroutable ? Unsettled::State::kUnroutable
                                        : Unsettled::State::kNotConfirmed;
    }
  }
  if (window_.Overdue(clock_.Now(), options_.confirm_timeout)) {
    // Confirms this late: the channel is stuck. What is still waiting is
    // not confirmed (requeued below, and the connection replaced).
    for (const std::vector<uint64_t>& delivery_tags : window_.TakeAll()) {
      for (uint64_t delivery_tag : delivery_tags) {
        auto it = unsettled_.find(delivery_tag);
        if (it != unsettled_.end()) it->second.state = Unsettled::State::kNotConfirmed;
      }
    }
  }
  return SettleAnswered();
}

absl::Status IdempotentConsumer::SettleAnswered() {
  // The answered prefix, in delivery order: acking with `multiple` must not
  // reach a delivery still waiting for its reply's confirm.
  auto end = unsettled_.begin();
  bool all_confirmed = true;
  for (; end != unsettled_.end() && end->second.state != Unsettled::State::kWaiting; ++end) {
    all_confirmed &= end->second.state == Unsettled::State::kConfirmed;
  }
  if (end == unsettled_.begin()) return absl::OkStatus();
  if (!options_.before_ack_failpoint.empty()) Failpoint(options_.before_ack_failpoint);
  std::vector<uint64_t> to_ack, to_requeue;
  for (auto it = unsettled_.begin(); it != end; ++it) {
    const Unsettled& u = it->second;
    switch (u.state) {
      case Unsettled::State::kConfirmed: to_ack.push_back(it->first); break;
      case Unsettled::State::kUnroutable: {
        // Its reply_to names no queue: redelivering it would fail the same
        // way forever, so it is poison. Its change stands; the row stays
        // SENDING until a reply reaches its producer (or it is FAILED and
        // alerted).
        absl::Status s = DeadLetter(deliveries_, dead_lettered_, options_.queue, u.delivery,
                                    absl::StrCat("reply_to '", u.reply_queue, "' is not a queue"));
        if (!s.ok()) return s;
        break;
      }
      case Unsettled::State::kNotConfirmed: to_requeue.push_back(it->first); break;
      case Unsettled::State::kWaiting: break;
    }
  }
  unsettled_.erase(unsettled_.begin(), end);
  if (all_confirmed || to_requeue.empty()) {
    // Everything outstanding up to the last confirmed tag is settled (a
    // dead-lettered one is rejected already).
    return to_ack.empty() ? absl::OkStatus() : deliveries_.Ack(to_ack.back(), /*multiple=*/true);
  }
  // Rare: settle one by one so no requeued delivery is acked by `multiple`.
  requeued_.Add(static_cast<int64_t>(to_requeue.size()));
  LogWarning("replies_not_confirmed",
             {KV("queue", options_.queue), KV("messages", to_requeue.size())});
  for (uint64_t tag : to_ack) {
    absl::Status s = deliveries_.Ack(tag, /*multiple=*/false);
    if (!s.ok()) return s;
  }
  for (uint64_t tag : to_requeue) {
    absl::Status s = deliveries_.Requeue(tag, /*multiple=*/false);
    if (!s.ok()) return s;
  }
  // Replies go on over a new connection (the next node of a cluster): on
  // RabbitMQ 3.10 a channel opened while a quorum queue elected its leader
  // can keep nacking every publish to it until the old leader's node is back.
  return FailReplies(absl::UnavailableError("replies not confirmed by broker"));
}

absl::Status IdempotentConsumer::FailReplies(const absl::Status& why) {
  replies_.Reset(why);
  window_.TakeAll();
  if (unsettled_.empty()) return why;
  // Their replies may or may not have reached the broker: the deliveries go
  // back (confirmed-but-unacked ones too: `multiple`), replied to again.
  const uint64_t last = unsettled_.rbegin()->first;
  requeued_.Add(static_cast<int64_t>(unsettled_.size()));
  LogWarning("batch_requeued", {KV("queue", options_.queue), KV("messages", unsettled_.size()),
                                KV("error", why.message())});
  unsettled_.clear();
  absl::Status s = deliveries_.Requeue(last, /*multiple=*/true);
  return s.ok() ? why : s;
}

void IdempotentConsumer::ForgetUnsettled() {
  // Their confirms, if any come, find nothing to settle.
  window_.TakeAll();
  unsettled_.clear();
  waiting_.clear();
}

}  // namespace outbox
