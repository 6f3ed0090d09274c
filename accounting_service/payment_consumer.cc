#include "accounting_service/payment_consumer.h"

#include "absl/strings/str_cat.h"
#include "accounting_service/accounting_codec.h"
#include "shared/base/status_macros.h"
#include "shared/observability/log.h"
#include "shared/observability/trace.h"
#include "shared/outbox/dead_letter.h"
#include "shared/outbox/repository.h"
#include "shared/runtime/failpoint.h"

namespace outbox::accounting {

PaymentConsumer::PaymentConsumer(MessageConsumer& payments, MessagePublisher& replies,
                                 VoucherLedger& ledger, const Clock& clock,
                                 MetricsRegistry& metrics, ConsumerOptions options)
    : payments_(payments),
      replies_(replies),
      ledger_(ledger),
      clock_(clock),
      options_(std::move(options)),
      applied_(metrics.AddCounter("outbox_vouchers_created_total", "vouchers booked")),
      duplicates_(
          metrics.AddCounter("outbox_duplicates_total", "messages seen before, replied to again")),
      dead_lettered_(DeadLetteredCounter(metrics, options_.pay_queue)),
      unauthenticated_(UnauthenticatedCounter(metrics, options_.pay_queue)),
      requeued_(metrics.AddCounter("outbox_requeued_total",
                                   "deliveries returned to the queue after a failure")),
      apply_failures_(StoreWriteFailures(metrics, "apply_batch")) {
  RegisterLinkMetrics(metrics, payments_, "consumer");
  RegisterLinkMetrics(metrics, replies_, "replies");
}

PaymentConsumer::~PaymentConsumer() {
  Stop();
}

void PaymentConsumer::Start() {
  thread_.Start([this] { return Step(); });
}

void PaymentConsumer::Stop() {
  thread_.Stop();
}

bool PaymentConsumer::Step() {
  if (thread_.stopping()) {
    // The batch in hand is booked and replied to: wait for its confirms and
    // ack it, so a clean stop leaves nothing to redeliver.
    while (!window_.empty() && replies_.connected() && payments_.connected()) {
      if (!Settle(absl::Milliseconds(20)).ok()) break;
    }
    return false;
  }
  // Take deliveries only while replies can be sent.
  absl::Status up = replies_.Connect();
  if (up.ok()) up = payments_.Connect();
  if (!up.ok()) {
    thread_.Sleep(absl::Milliseconds(100));
    return true;
  }
  // With replies in flight, take only what is already waiting: their
  // confirms are read right after.
  const bool in_flight = !window_.empty();
  auto deliveries =
      payments_.Next(options_.prefetch, in_flight ? absl::ZeroDuration() : absl::Milliseconds(200));
  if (!deliveries.ok()) {
    payments_.Reset(deliveries.status());
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
  if (!s.ok()) {
    // Unacked deliveries return to the queue when the connection goes.
    if (!payments_.connected()) {
      payments_.Reset(s);
      ForgetUnsettled();
    }
    if (!replies_.connected()) replies_.Reset(s);
  }
  return true;
}

absl::Status PaymentConsumer::CheckReplyQueue(const std::string& queue) {
  if (known_reply_queues_.count(queue)) return absl::OkStatus();
  auto state = replies_.Inspect(queue);
  if (state.ok()) {
    known_reply_queues_.insert(queue);
    return absl::OkStatus();
  }
  return state.status();  // NOT_FOUND leaves the connection usable
}

absl::Status PaymentConsumer::HandleBatch(const std::vector<Delivery>& deliveries) {
  Admitted batch;
  RETURN_IF_ERROR(Admit(deliveries, &batch));
  if (batch.events.empty()) return absl::OkStatus();
  auto outcomes = ledger_.ApplyBatch(batch.events);
  if (!outcomes.ok()) {
    apply_failures_.Add();
    thread_.Sleep(absl::Milliseconds(200));
    return RequeueBatch(batch, outcomes.status());
  }
  Failpoint(kFpAccountingAfterCommitBeforeReply);
  // The vouchers are committed; each delivery is acked only once the reply
  // that answers it is confirmed. Otherwise it is redelivered, found to be a
  // duplicate, and replied to again.
  RETURN_IF_ERROR(PublishReplies(Answer(batch.events, batch.sources, *outcomes)));
  return Settle(absl::ZeroDuration());
}

absl::Status PaymentConsumer::Admit(const std::vector<Delivery>& deliveries, Admitted* batch) {
  for (const Delivery& d : deliveries) {
    // A forged event would book a voucher for a payment that never happened.
    absl::Status signature = CheckSignature(options_.keys, d);
    auto event = signature.ok()
                     ? DecodePaymentCreated(d.body, d.message_id, options_.max_amount_minor)
                     : absl::StatusOr<PaymentEvent>(signature);
    if (!event.ok()) {
      if (!signature.ok()) unauthenticated_.Add();
      RETURN_IF_ERROR(DeadLetter(payments_, dead_lettered_, options_.pay_queue, d,
                                 std::string(event.status().message())));
      continue;
    }
    // Everything about the message is checked before anything is booked:
    // a reply that can never be delivered makes it poison now, not after
    // its voucher was committed.
    const std::string& reply_to = d.reply_to.empty() ? options_.acc_queue : d.reply_to;
    if (absl::IsNotFound(CheckReplyQueue(reply_to))) {
      RETURN_IF_ERROR(DeadLetter(payments_, dead_lettered_, options_.pay_queue, d,
                                 absl::StrCat("reply_to '", reply_to, "' is not a queue")));
      continue;
    }
    event->traceparent = d.traceparent;
    batch->events.push_back(std::move(event).value());
    batch->sources.push_back(&d);
    batch->last_tag = d.delivery_tag;
  }
  return absl::OkStatus();
}

absl::Status PaymentConsumer::RequeueBatch(const Admitted& batch, const absl::Status& why) {
  // `multiple` also sends back the earlier deliveries still waiting for
  // their replies' confirms: they are replied to again, as duplicates.
  const size_t earlier = unsettled_.size();
  window_.TakeAll();
  unsettled_.clear();
  requeued_.Add(static_cast<int64_t>(batch.events.size() + earlier));
  LogWarning("payment_batch_requeued",
             {KV("messages", batch.events.size() + earlier), KV("error", why.message())});
  absl::Status s = payments_.Requeue(batch.last_tag, /*multiple=*/true);
  return s.ok() ? why : s;
}

absl::Status PaymentConsumer::PublishReplies(const std::vector<Reply>& replies) {
  const absl::Time sent = clock_.Now();
  for (size_t i = 0; i < replies.size(); ++i) {
    auto tag = replies_.Publish(replies[i].message);
    if (!tag.ok()) {
      // The rest of this batch is not in the window yet: it goes back too.
      for (size_t k = i; k < replies.size(); ++k) Track(replies[k]);
      return FailReplies(tag.status());
    }
    std::vector<uint64_t> answered;
    for (const Delivery* d : replies[i].answers) answered.push_back(d->delivery_tag);
    window_.Add(*tag, std::move(answered), sent);
    Track(replies[i]);
  }
  return absl::OkStatus();
}

std::vector<PaymentConsumer::Reply> PaymentConsumer::Answer(
    const std::vector<PaymentEvent>& events, const std::vector<const Delivery*>& sources,
    const std::vector<ApplyOutcome>& outcomes) {
  const int64_t now = clock_.NowMillis();
  std::vector<Reply> replies;
  // Publishers that accept batch replies: one reply per reply queue, listing
  // every message of theirs in this batch, new and duplicate alike.
  std::map<std::string, size_t> batch_for_queue;         // -> its index in `replies`
  std::map<size_t, std::vector<Accounted>> batch_lists;  // by that index
  for (size_t i = 0; i < events.size(); ++i) {
    const PaymentEvent& e = events[i];
    const ApplyOutcome& o = outcomes[i];
    o.duplicate ? duplicates_.Add() : applied_.Add();
    const std::string& reply_to =
        sources[i]->reply_to.empty() ? options_.acc_queue : sources[i]->reply_to;
    if (LogEnabled(LogLevel::kDebug)) {
      LogDebug(o.duplicate ? "payment_duplicate" : "voucher_booked",
               {KV("payment_id", e.payment_id), KV("message_id", e.message_id),
                KV("trace_id", TraceIdOf(e.traceparent)), KV("voucher_id", o.voucher_id),
                KV("redelivered", sources[i]->redelivered)});
    }
    // Each reply continues the payment's trace as accounting's span: a
    // reply of its own in its header, a batch reply per message.
    const std::string traceparent =
        e.traceparent.empty() ? "" : ContinueOrStart(e.traceparent).Traceparent();
    if (!e.batch_replies_accepted) {  // an older publisher: a reply of its own
      replies.push_back(
          {{reply_to, e.message_id,
            EncodePaymentAccounted(e.message_id, e.payment_id, o.voucher_id, o.duplicate, now), "",
            kPaymentAccountedType, traceparent},
           {sources[i]}});
      continue;
    }
    auto [it, first] = batch_for_queue.try_emplace(reply_to, replies.size());
    if (first) replies.push_back({{reply_to, "", "", "", kPaymentsAccountedType, ""}, {}});
    replies[it->second].answers.push_back(sources[i]);
    batch_lists[it->second].push_back(
        {e.message_id, e.payment_id, o.voucher_id, o.duplicate, traceparent});
  }
  for (const auto& [index, list] : batch_lists) {
    // Its id names the first message it answers and how many it does.
    replies[index].message.message_id = absl::StrCat(list.front().message_id, "+", list.size());
    replies[index].message.body = EncodePaymentsAccounted(list, now);
  }
  return replies;
}

void PaymentConsumer::Track(const Reply& reply) {
  for (const Delivery* d : reply.answers) {
    unsettled_.emplace(d->delivery_tag, Unsettled{*d, reply.message.topic});
  }
}

absl::Status PaymentConsumer::Settle(absl::Duration wait) {
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

absl::Status PaymentConsumer::SettleAnswered() {
  // The answered prefix, in delivery order: acking with `multiple` must not
  // reach a delivery still waiting for its reply's confirm.
  auto end = unsettled_.begin();
  bool all_confirmed = true;
  for (; end != unsettled_.end() && end->second.state != Unsettled::State::kWaiting; ++end) {
    all_confirmed &= end->second.state == Unsettled::State::kConfirmed;
  }
  if (end == unsettled_.begin()) return absl::OkStatus();
  Failpoint(kFpAccountingAfterReplyBeforeAck);
  std::vector<uint64_t> to_ack, to_requeue;
  for (auto it = unsettled_.begin(); it != end; ++it) {
    const Unsettled& u = it->second;
    switch (u.state) {
      case Unsettled::State::kConfirmed: to_ack.push_back(it->first); break;
      case Unsettled::State::kUnroutable: {
        // Its reply_to names no queue: redelivering it would fail the same
        // way forever, so it is poison. Its voucher stands; the row stays
        // SENDING until a reply reaches the payment side (or it is FAILED
        // and alerted).
        absl::Status s = DeadLetter(payments_, dead_lettered_, options_.pay_queue, u.delivery,
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
    return to_ack.empty() ? absl::OkStatus() : payments_.Ack(to_ack.back(), /*multiple=*/true);
  }
  // Rare: settle one by one so no requeued delivery is acked by `multiple`.
  requeued_.Add(static_cast<int64_t>(to_requeue.size()));
  LogWarning("payment_replies_not_confirmed", {KV("messages", to_requeue.size())});
  for (uint64_t tag : to_ack) {
    absl::Status s = payments_.Ack(tag, /*multiple=*/false);
    if (!s.ok()) return s;
  }
  for (uint64_t tag : to_requeue) {
    absl::Status s = payments_.Requeue(tag, /*multiple=*/false);
    if (!s.ok()) return s;
  }
  // Replies go on over a new connection (the next node of a cluster): on
  // RabbitMQ 3.10 a channel opened while a quorum queue elected its leader
  // can keep nacking every publish to it until the old leader's node is back.
  return FailReplies(absl::UnavailableError("replies not confirmed by broker"));
}

absl::Status PaymentConsumer::FailReplies(const absl::Status& why) {
  replies_.Reset(why);
  window_.TakeAll();
  if (unsettled_.empty()) return why;
  // Their replies may or may not have reached the broker: the deliveries go
  // back (confirmed-but-unacked ones too: `multiple`), replied to again.
  const uint64_t last = unsettled_.rbegin()->first;
  requeued_.Add(static_cast<int64_t>(unsettled_.size()));
  LogWarning("payment_batch_requeued",
             {KV("messages", unsettled_.size()), KV("error", why.message())});
  unsettled_.clear();
  absl::Status s = payments_.Requeue(last, /*multiple=*/true);
  return s.ok() ? why : s;
}

void PaymentConsumer::ForgetUnsettled() {
  // Their confirms, if any come, find nothing to settle.
  window_.TakeAll();
  unsettled_.clear();
}

}  // namespace outbox::accounting
