#include "payment_service/ack_listener.h"

#include <string>
#include <vector>

#include "payment_service/payment_codec.h"
#include "shared/failpoint.h"
#include "shared/log.h"

namespace outbox::payment {

AckListener::AckListener(MarkSentFn mark_sent, AlertSink& alerts, AmqpUrl url,
                         Topology topology, AckListenerOptions options)
    : mark_sent_(std::move(mark_sent)),
      alerts_(alerts),
      session_(std::move(url), topology, "payment-ack-listener",
               [queue = topology.acc_queue, prefetch = options.prefetch](AmqpConnection& c) {
                 return c.Consume(queue, prefetch);
               }),
      options_(options) {}

AckListener::~AckListener() { Stop(); }

void AckListener::Start() { thread_ = std::thread([this] { Run(); }); }

void AckListener::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void AckListener::Run() {
  while (!stop_.HasBeenNotified()) {
    auto conn = session_.Get();
    connected_ = conn.ok();
    if (!conn.ok()) {
      stop_.WaitForNotificationWithTimeout(absl::Milliseconds(100));
      continue;
    }
    auto deliveries = (*conn)->NextDeliveries(options_.prefetch, absl::Milliseconds(200));
    if (!deliveries.ok()) {
      session_.Reset(deliveries.status());
      continue;
    }
    if (deliveries->empty()) continue;
    absl::Status s = HandleBatch(**conn, *deliveries);
    if (!s.ok()) session_.Reset(s);  // unacked deliveries come back after reconnect
  }
}

absl::Status AckListener::HandleBatch(AmqpConnection& conn,
                                      const std::vector<Delivery>& deliveries) {
  std::vector<std::string> message_ids;
  uint64_t last_valid_tag = 0;  // settled (rejected) tags must not be acked again
  for (const Delivery& d : deliveries) {
    auto ack = DecodePaymentAccounted(d.body);
    if (!ack.ok()) {
      ++stats_.dead_lettered;
      LogError("ack_dead_lettered", {KV("message_id", d.message_id), KV("error", ack.status().message())});
      alerts_.Raise(DeadLetterAlert(session_.topology().acc_queue, d.message_id,
                                    std::string(ack.status().message())));
      absl::Status s = conn.Reject(d.delivery_tag);
      if (!s.ok()) return s;
      continue;
    }
    message_ids.push_back(ack->message_id);
    last_valid_tag = d.delivery_tag;
  }
  if (message_ids.empty()) return absl::OkStatus();
  Failpoint(kFpPaymentAckBeforeMarkSent);
  {
    auto changed = mark_sent_(message_ids);
    if (!changed.ok()) {
      // Nothing marked: give the deliveries back and try again later.
      LogError("mark_sent_failed", {KV("messages", message_ids.size()),
                                    KV("error", changed.status().message())});
      absl::Status s = conn.Requeue(last_valid_tag, /*multiple=*/true);
      stop_.WaitForNotificationWithTimeout(absl::Milliseconds(200));
      return s;
    }
    stats_.acknowledged += *changed;
    stats_.harmless += static_cast<int64_t>(message_ids.size()) - *changed;
  }
  return conn.Ack(last_valid_tag, /*multiple=*/true);
}

}  // namespace outbox::payment
