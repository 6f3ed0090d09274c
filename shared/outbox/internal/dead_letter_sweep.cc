#include "shared/outbox/internal/dead_letter_sweep.h"

#include <utility>

#include "shared/observability/log.h"
#include "shared/outbox/transport.h"

namespace outbox {

DeadLetterSweep::DeadLetterSweep(DeadLetters& dead_letters, const MessageKeys* keys,
                                 RecoveryRepository& rows, Removed removed, const Clock& clock,
                                 MetricsRegistry& metrics, Options options)
    : dead_letters_(dead_letters),
      keys_(keys),
      rows_(rows),
      removed_callback_(std::move(removed)),
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
  auto row = rows_.Get(d.message_id);
  return row.ok() && row->status == OutboxStatus::kSent;
}

int64_t DeadLetterSweep::Run() {
  int64_t total = 0;
  for (const std::string& queue : options_.queues) {
    const DeadLettersRemoved removed = dead_letters_.RemoveSettled(
        queue, options_.per_pass, [this](const Delivery& d) { return Settled(d); });
    if (absl::IsNotFound(removed.status)) continue;  // not declared yet: nothing parked
    // What was removed before an error is gone from the queue all the same.
    const std::string dlq = DeadLetterQueueOf(queue);
    for (const std::string& message_id : removed.message_ids) {
      removed_[queue]->Add();
      LogInfo("dead_letter_settled_removed",
              {KV("message_id", message_id), KV("dead_letter_queue", dlq)});
      if (removed_callback_) removed_callback_(message_id, clock_.NowMillis());
    }
    total += static_cast<int64_t>(removed.message_ids.size());
    if (!removed.status.ok()) {
      LogWarning(
          "dead_letters_not_swept",
          {KV("queue", queue), KV("removed", static_cast<int64_t>(removed.message_ids.size())),
           KV("error", removed.status.message())});
    }
  }
  return total;
}

}  // namespace outbox
