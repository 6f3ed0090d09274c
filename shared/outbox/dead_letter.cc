#include "shared/outbox/dead_letter.h"

#include "absl/strings/str_cat.h"
#include "shared/observability/log.h"

namespace outbox {
namespace {

Alert DeadLetterAlert(const std::string& queue, const std::string& message_id,
                      const std::string& error) {
  Alert a;
  a.name = "OutboxMessageDeadLettered";
  a.severity = "warning";
  a.labels = {{"queue", queue}, {"message_id", message_id.empty() ? "(none)" : message_id}};
  a.annotations = {{"summary", absl::StrCat("message ", message_id, " on ", queue,
                                            " was dead-lettered to ", DeadLetterQueueOf(queue))},
                   {"error", error}};
  return a;
}

}  // namespace

absl::Status DeadLetter(MessageConsumer& consumer, AlertSink& alerts, Counter& dead_lettered,
                        const std::string& queue, const Delivery& delivery,
                        const std::string& why) {
  dead_lettered.Add();
  LogError("message_dead_lettered",
           {KV("message_id", delivery.message_id), KV("queue", queue),
            KV("dead_letter_queue", DeadLetterQueueOf(queue)), KV("error", why)});
  alerts.Raise(DeadLetterAlert(queue, delivery.message_id, why));
  return consumer.Reject(delivery.delivery_tag);
}

}  // namespace outbox
