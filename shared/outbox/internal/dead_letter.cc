#include "shared/outbox/internal/dead_letter.h"

#include "shared/observability/internal/trace.h"
#include "shared/observability/log.h"

namespace outbox {

Counter& DeadLetteredCounter(MetricsRegistry& metrics, const std::string& queue) {
  return metrics.AddCounter(
      "outbox_dead_lettered_total",
      "messages rejected to the dead-letter queue (undecodable, invalid, never applicable, "
      "or a reply that cannot be routed)",
      {{"queue", queue}});
}

Counter& UnauthenticatedCounter(MetricsRegistry& metrics, const std::string& queue) {
  return metrics.AddCounter(
      "outbox_unauthenticated_messages_total",
      "messages dead-lettered because their signature was missing or wrong (forged, or a "
      "sender without the current keys)",
      {{"queue", queue}});
}

absl::Status DeadLetter(MessageConsumer& consumer, Counter& dead_lettered, const std::string& queue,
                        const Delivery& delivery, const std::string& why) {
  dead_lettered.Add();
  LogError(
      "message_dead_lettered",
      {KV("message_id", delivery.message_id), KV("trace_id", TraceIdOf(delivery.traceparent)),
       KV("queue", queue), KV("dead_letter_queue", DeadLetterQueueOf(queue)), KV("error", why)});
  return consumer.Reject(delivery.delivery_tag);
}

bool StoreUnavailable(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsResourceExhausted(s) || absl::IsDataLoss(s);
}

}  // namespace outbox
