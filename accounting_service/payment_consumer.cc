#include "accounting_service/payment_consumer.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#include "accounting_service/accounting_codec.h"
#include "shared/failpoint.h"
#include "shared/log.h"

namespace outbox::accounting {

PaymentConsumer::PaymentConsumer(VoucherStore& store, AlertSink& alerts, const Clock& clock,
                                 const AmqpUrl& url, const Topology& topology,
                                 ConsumerOptions options)
    : store_(store),
      alerts_(alerts),
      clock_(clock),
      topology_(topology),
      options_(options),
      consume_session_(url, topology, "accounting-consumer",
                       [queue = topology.pay_queue, prefetch = options.prefetch](AmqpConnection& c) {
                         return c.Consume(queue, prefetch);
                       }),
      reply_session_(url, topology, "accounting-replies",
                     [](AmqpConnection& c) { return c.EnableConfirms(); }) {}

PaymentConsumer::~PaymentConsumer() { Stop(); }

void PaymentConsumer::Start() { thread_ = std::thread([this] { Run(); }); }

void PaymentConsumer::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void PaymentConsumer::Run() {
  while (!stop_.HasBeenNotified()) {
    // Take deliveries only while replies can be sent.
    auto out = reply_session_.Get();
    auto in = out.ok() ? consume_session_.Get() : out;
    if (!out.ok() || !in.ok()) {
      stop_.WaitForNotificationWithTimeout(absl::Milliseconds(100));
      continue;
    }
    auto deliveries = (*in)->NextDeliveries(options_.prefetch, absl::Milliseconds(200));
    if (!deliveries.ok()) {
      consume_session_.Reset(deliveries.status());
      continue;
    }
    if (deliveries->empty()) {
      absl::Status s = (*out)->Poll(absl::Milliseconds(1));  // notice a closed reply connection
      if (!s.ok()) reply_session_.Reset(s);
      continue;
    }
    absl::Status s = HandleBatch(**in, **out, *deliveries);
    if (!s.ok()) {
      // Unacked deliveries return to the queue when the connection goes.
      if (!(*in)->healthy()) consume_session_.Reset(s);
      if (!(*out)->healthy()) reply_session_.Reset(s);
    }
  }
}

absl::Status PaymentConsumer::HandleBatch(AmqpConnection& in, AmqpConnection& out,
                                          const std::vector<Delivery>& deliveries) {
  std::vector<PaymentEvent> events;
  std::vector<const Delivery*> sources;
  uint64_t last_valid_tag = 0;  // rejected tags are settled and must not be acked again
  for (const Delivery& d : deliveries) {
    auto event = DecodePaymentCreated(d.body, d.message_id);
    if (!event.ok()) {
      ++stats_.dead_lettered;
      LogError("payment_message_dead_lettered",
               {KV("message_id", d.message_id), KV("queue", topology_.pay_queue),
                KV("dead_letter_queue", Topology::DeadLetterQueue(topology_.pay_queue)),
                KV("error", event.status().message())});
      alerts_.Raise(DeadLetterAlert(topology_.pay_queue, d.message_id,
                                    std::string(event.status().message())));
      absl::Status s = in.Reject(d.delivery_tag);
      if (!s.ok()) return s;
      continue;
    }
    events.push_back(std::move(event).value());
    sources.push_back(&d);
    last_valid_tag = d.delivery_tag;
  }
  if (events.empty()) return absl::OkStatus();

  auto requeue = [&](const absl::Status& why) {
    stats_.requeued += events.size();
    LogWarning("payment_batch_requeued", {KV("messages", events.size()), KV("error", why.message())});
    absl::Status s = in.Requeue(last_valid_tag, /*multiple=*/true);
    return s.ok() ? why : s;
  };

  auto outcomes = store_.ApplyBatch(events);
  if (!outcomes.ok()) {
    stop_.WaitForNotificationWithTimeout(absl::Milliseconds(200));
    return requeue(outcomes.status());
  }
  Failpoint(kFpAccountingAfterCommitBeforeReply);
  const int64_t now = clock_.NowMillis();
  std::vector<OutgoingMessage> replies;
  replies.reserve(events.size());
  for (size_t i = 0; i < events.size(); ++i) {
    const ApplyOutcome& o = (*outcomes)[i];
    o.duplicate ? ++stats_.duplicates : ++stats_.applied;
    const std::string& reply_to =
        sources[i]->reply_to.empty() ? topology_.acc_queue : sources[i]->reply_to;
    replies.push_back({reply_to, events[i].message_id,
                       EncodePaymentAccounted(events[i].message_id, events[i].payment_id,
                                              o.voucher_id, o.duplicate, now),
                       "", "PaymentAccounted"});
  }
  // The vouchers are committed; the deliveries are acked only once every
  // reply is confirmed. Otherwise they are redelivered, found to be
  // duplicates, and replied to again.
  std::vector<bool> unroutable;
  auto confirmed = out.PublishConfirmed(replies, options_.confirm_timeout, &unroutable);
  if (!confirmed.ok()) return requeue(confirmed.status());
  std::vector<uint64_t> to_ack, to_requeue;
  for (size_t i = 0; i < replies.size(); ++i) {
    const Delivery& d = *sources[i];
    if ((*confirmed)[i]) {
      to_ack.push_back(d.delivery_tag);
    } else if (unroutable[i]) {
      // Its reply_to names no queue: redelivering it would fail the same way
      // forever, so it is poison. Its voucher stands; the row stays SENDING
      // until a reply reaches the payment side (or it is FAILED and alerted).
      ++stats_.dead_lettered;
      const std::string why = absl::StrCat("reply_to '", replies[i].routing_key, "' is not a queue");
      LogError("payment_message_dead_lettered",
               {KV("message_id", d.message_id), KV("queue", topology_.pay_queue), KV("error", why)});
      alerts_.Raise(DeadLetterAlert(topology_.pay_queue, d.message_id, why));
      absl::Status s = in.Reject(d.delivery_tag);
      if (!s.ok()) return s;
    } else {
      to_requeue.push_back(d.delivery_tag);
    }
  }
  Failpoint(kFpAccountingAfterReplyBeforeAck);
  if (to_requeue.empty()) {
    // Everything still outstanding up to the last confirmed tag is confirmed.
    return to_ack.empty() ? absl::OkStatus() : in.Ack(to_ack.back(), /*multiple=*/true);
  }
  // Rare: settle one by one so no requeued delivery is acked by `multiple`.
  stats_.requeued += to_requeue.size();
  LogWarning("payment_replies_not_confirmed", {KV("messages", to_requeue.size())});
  for (uint64_t tag : to_ack) {
    absl::Status s = in.Ack(tag, /*multiple=*/false);
    if (!s.ok()) return s;
  }
  for (uint64_t tag : to_requeue) {
    absl::Status s = in.Requeue(tag, /*multiple=*/false);
    if (!s.ok()) return s;
  }
  return absl::UnavailableError("replies not confirmed by broker");
}

}  // namespace outbox::accounting
