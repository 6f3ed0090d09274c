#include "recovery_service/dead_letter_sweep.h"

#include <utility>

#include "shared/observability/log.h"
#include "shared/outbox/transport.h"

namespace outbox::recovery {

DeadLetterSweep::DeadLetterSweep(DeadLetters& dead_letters, const MessageKeys* keys,
                                 RowStatus row_status, RecordAudit audit, const Clock& clock,
                                 MetricsRegistry& metrics, Options options)
    : dead_letters_(dead_letters),
      keys_(keys),
      row_status_(std::move(row_status)),
      audit_(std::move(audit)),
      clock_(clock),
      options_(std::move(options)) {
  for (const std::string& queue : options_.queues) {
    removed_[queue] = &metrics.AddCounter(
        "outbox_dead_letters_settled_removed_total",
        "dead letters removed by recovery because their message's outbox row is SENT",
        {{"queue", DeadLetterQueueOf(queue)}});
  }
}

bool DeadLetterSweep::Settled(const Delivery& d) const {
  if (d.message_id.empty()) return false;
  if (keys_ != nullptr && !keys_->Verify(d).ok()) return false;  // forged: an operator looks
  auto status = row_status_(d.message_id);
  return status.ok() && *status == OutboxStatus::kSent;
}

int64_t DeadLetterSweep::Run() {
  int64_t total = 0;
  for (const std::string& queue : options_.queues) {
    auto removed = dead_letters_.RemoveSettled(queue, options_.per_pass,
                                               [this](const Delivery& d) { return Settled(d); });
    if (absl::IsNotFound(removed.status())) continue;  // not declared yet: nothing parked
    if (!removed.ok()) {
      LogWarning("dead_letters_not_swept",
                 {KV("queue", queue), KV("error", removed.status().message())});
      continue;
    }
    const std::string dlq = DeadLetterQueueOf(queue);
    for (const std::string& message_id : *removed) {
      removed_[queue]->Add();
      LogInfo("dead_letter_settled_removed",
              {KV("message_id", message_id), KV("dead_letter_queue", dlq)});
      audit_(AuditRecord{0, clock_.NowMillis(), "recovery", "remove_settled_dead_letter",
                         message_id, false, 1, "ok"});
    }
    total += static_cast<int64_t>(removed->size());
  }
  return total;
}

}  // namespace outbox::recovery
