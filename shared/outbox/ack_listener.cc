#include "shared/outbox/ack_listener.h"

#include <utility>

#include "shared/observability/log.h"
#include "shared/observability/trace.h"
#include "shared/outbox/dead_letter.h"
#include "shared/runtime/failpoint.h"

namespace outbox {

AckListener::AckListener(MessageConsumer& acks, OutboxRepository& outbox, ReplyDecoder decode,
                         MetricsRegistry& metrics, AckListenerOptions options)
    : acks_(acks),
      outbox_(outbox),
      decode_(std::move(decode)),
      options_(std::move(options)),
      replies_(metrics.AddCounter("outbox_ack_messages_total",
                                  "reply messages received (each acknowledges one or more)")),
      acknowledged_(metrics.AddCounter("outbox_acks_total", "acknowledgements from accounting",
                                       {{"result", "marked_sent"}})),
      late_(metrics.AddCounter("outbox_late_acks_total",
                               "acknowledgements that closed a FAILED row (delivered after all)")),
      harmless_(metrics.AddCounter("outbox_acks_total", "", {{"result", "harmless"}})),
      dead_lettered_(DeadLetteredCounter(metrics, options_.queue)),
      unauthenticated_(UnauthenticatedCounter(metrics, options_.queue)) {
  RegisterLinkMetrics(metrics, acks_, "ack_listener");
}

AckListener::~AckListener() {
  Stop();
}

void AckListener::Start() {
  thread_.Start([this] { return Step(); });
}

void AckListener::Stop() {
  thread_.Stop();
}

bool AckListener::Step() {
  if (thread_.stopping()) return false;
  absl::Status up = acks_.Connect();
  if (!up.ok()) {
    thread_.Sleep(absl::Milliseconds(100));
    return true;
  }
  auto deliveries = acks_.Next(options_.prefetch, absl::Milliseconds(200));
  if (!deliveries.ok()) {
    acks_.Reset(deliveries.status());
    return true;
  }
  if (deliveries->empty()) return true;
  absl::Status s = HandleBatch(*deliveries);
  if (!s.ok()) acks_.Reset(s);  // unacked deliveries come back after reconnect
  return true;
}

absl::Status AckListener::HandleBatch(const std::vector<Delivery>& deliveries) {
  replies_.Add(static_cast<int64_t>(deliveries.size()));
  std::vector<std::string> message_ids;
  uint64_t last_valid_tag = 0;  // settled (rejected) tags must not be acked again
  for (const Delivery& d : deliveries) {
    // A forged acknowledgement would mark a row SENT that was never booked.
    absl::Status signature = CheckSignature(options_.keys, d);
    auto acks =
        signature.ok() ? decode_(d) : absl::StatusOr<std::vector<Acknowledgement>>(signature);
    if (!acks.ok()) {
      if (!signature.ok()) unauthenticated_.Add();
      absl::Status s = DeadLetter(acks_, dead_lettered_, options_.queue, d,
                                  std::string(acks.status().message()));
      if (!s.ok()) return s;
      continue;
    }
    last_valid_tag = d.delivery_tag;
    for (const Acknowledgement& ack : *acks) {
      message_ids.push_back(ack.message_id);
      if (LogEnabled(LogLevel::kDebug)) {
        LogDebug(
            "ack_received",
            {KV("payment_id", ack.biz_key), KV("message_id", ack.message_id),
             KV("trace_id", TraceIdOf(ack.traceparent.empty() ? d.traceparent : ack.traceparent)),
             KV("duplicate", ack.duplicate)});
      }
    }
  }
  if (message_ids.empty()) return absl::OkStatus();
  Failpoint(kFpPaymentReplyBeforeRecordAcks);
  auto changed = outbox_.RecordAcks(message_ids);
  if (!changed.ok()) {
    // Nothing marked: give the deliveries back and try again later.
    LogError("mark_sent_failed",
             {KV("messages", message_ids.size()), KV("error", changed.status().message())});
    absl::Status s = acks_.Requeue(last_valid_tag, /*multiple=*/true);
    thread_.Sleep(absl::Milliseconds(200));
    return s;
  }
  acknowledged_.Add(changed->changed());
  late_.Add(changed->late);
  harmless_.Add(static_cast<int64_t>(message_ids.size()) - changed->changed());
  if (changed->late > 0) {
    LogInfo("late_ack", {KV("rows", changed->late), KV("first_message_id", message_ids.front()),
                         KV("effect", "FAILED rows turned SENT")});
  }
  return acks_.Ack(last_valid_tag, /*multiple=*/true);
}

}  // namespace outbox
