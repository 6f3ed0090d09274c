#include "shared/outbox/ack_listener.h"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <utility>

#include "shared/base/status_macros.h"
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
      acknowledged_(metrics.AddCounter("outbox_acks_total", "acknowledgements from the consumer",
                                       {{"result", "marked_sent"}})),
      late_(metrics.AddCounter("outbox_late_acks_total",
                               "acknowledgements that closed a FAILED row (delivered after all)")),
      harmless_(metrics.AddCounter("outbox_acks_total", "", {{"result", "harmless"}})),
      rejected_(metrics.AddCounter("outbox_acks_total", "", {{"result", "rejected"}})),
      dead_lettered_(DeadLetteredCounter(metrics, options_.queue)),
      unauthenticated_(UnauthenticatedCounter(metrics, options_.queue)),
      clock_(options_.clock ? *options_.clock : SystemClock::Get()) {
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
  if (!held_.empty()) {
    absl::Status s = RetryHeld();
    if (!s.ok()) {
      acks_.Reset(s);  // the broker requeues what was held
      held_.clear();
    }
    return true;
  }
  auto deliveries = acks_.Next(options_.prefetch, absl::Milliseconds(200));
  if (!deliveries.ok()) {
    acks_.Reset(deliveries.status());
    return true;
  }
  if (deliveries->empty()) return true;
  absl::Status s = HandleBatch(*deliveries);
  if (!s.ok()) {
    acks_.Reset(s);  // unacked deliveries come back after reconnect
    held_.clear();
  }
  return true;
}

absl::Status AckListener::RetryHeld() {
  // Waiting on the connection keeps it alive and takes what else arrives.
  const absl::Duration wait =
      std::clamp(retry_at_ - clock_.Now(), absl::ZeroDuration(), absl::Milliseconds(200));
  const size_t prefetch = static_cast<size_t>(std::max(1, options_.prefetch));
  ASSIGN_OR_RETURN(std::vector<Delivery> more,
                   acks_.Next(held_.size() < prefetch ? prefetch - held_.size() : 1, wait));
  held_.insert(held_.end(), std::make_move_iterator(more.begin()),
               std::make_move_iterator(more.end()));
  if (clock_.Now() < retry_at_) return absl::OkStatus();
  std::vector<Delivery> batch;
  batch.swap(held_);
  return HandleBatch(batch);
}

void AckListener::Hold(const std::vector<Delivery>& deliveries, uint64_t acked_through,
                       const std::set<uint64_t>& dead_lettered, const absl::Status& why) {
  for (const Delivery& d : deliveries) {
    if (d.delivery_tag > acked_through && !dead_lettered.count(d.delivery_tag)) {
      held_.push_back(d);
    }
  }
  absl::Duration pause = absl::Milliseconds(200);
  for (int i = 0; i < store_failures_ && pause < options_.store_retry_max; ++i) pause *= 2;
  pause = std::min(pause, options_.store_retry_max);
  ++store_failures_;
  retry_at_ = clock_.Now() + pause;
  LogWarning("replies_held", {KV("queue", options_.queue), KV("messages", held_.size()),
                              KV("retry_in", absl::FormatDuration(pause)),
                              KV("failures", store_failures_), KV("error", why.message())});
}

absl::Status AckListener::HandleBatch(const std::vector<Delivery>& deliveries) {
  replies_.Add(static_cast<int64_t>(deliveries.size()));
  const size_t max_rows = MaxRowsPerCommit();
  std::vector<std::string> message_ids;
  std::vector<Rejection> rejects;
  uint64_t last_valid_tag = 0;  // settled (rejected) tags must not be acked again
  uint64_t acked_through = 0;
  std::set<uint64_t> dead_lettered;
  store_refused_ = false;
  // Records a chunk; if the store refuses it, what is not acked is held.
  auto record = [&]() -> absl::Status {
    absl::Status s = RecordChunk(message_ids, rejects, last_valid_tag);
    if (s.ok()) {
      acked_through = last_valid_tag;
      store_failures_ = 0;
    } else if (store_refused_) {
      Hold(deliveries, acked_through, dead_lettered, s);
    }
    return s;
  };
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
      dead_lettered.insert(d.delivery_tag);
      continue;
    }
    // Whole replies per chunk: this one would overflow it, so the chunk
    // so far is recorded and acked first.
    if (message_ids.size() + rejects.size() > 0 &&
        message_ids.size() + rejects.size() + acks->size() > max_rows) {
      absl::Status s = record();
      if (!s.ok()) return store_refused_ ? absl::OkStatus() : s;
      message_ids.clear();
      rejects.clear();
    }
    last_valid_tag = d.delivery_tag;
    for (const Acknowledgement& ack : *acks) {
      if (!ack.rejected_reason.empty()) {
        rejects.push_back({ack.message_id, ack.rejected_reason, ack.answered_at});
        LogWarning("message_rejected",
                   {KV(options_.biz_key_label, ack.biz_key), KV("message_id", ack.message_id),
                    KV("reason", ack.rejected_reason)});
        continue;
      }
      message_ids.push_back(ack.message_id);
      if (LogEnabled(LogLevel::kDebug)) {
        LogDebug(
            "ack_received",
            {KV(options_.biz_key_label, ack.biz_key), KV("message_id", ack.message_id),
             KV("trace_id", TraceIdOf(ack.traceparent.empty() ? d.traceparent : ack.traceparent)),
             KV("duplicate", ack.duplicate)});
      }
    }
  }
  if (message_ids.empty() && rejects.empty()) return absl::OkStatus();
  absl::Status s = record();
  return store_refused_ ? absl::OkStatus() : s;
}

size_t AckListener::MaxRowsPerCommit() const {
  return static_cast<size_t>(std::max(1, options_.max_rows_per_commit));
}

absl::Status AckListener::RecordChunk(const std::vector<std::string>& message_ids,
                                      const std::vector<Rejection>& rejects, uint64_t last_tag) {
  const size_t max_rows = MaxRowsPerCommit();
  if (!rejects.empty()) {
    Failpoint(options_.record_failpoint);
    auto closed = outbox_.RecordRejects(rejects);
    if (!closed.ok()) {
      LogError("mark_rejected_failed",
               {KV("messages", rejects.size()), KV("error", closed.status().message())});
      store_refused_ = true;
      return closed.status();
    }
    rejected_.Add(*closed);
    harmless_.Add(static_cast<int64_t>(rejects.size()) - *closed);
  }
  AckTally total;
  for (size_t from = 0; from < message_ids.size(); from += max_rows) {
    // One reply longer than the bound is split across transactions; it is
    // acked only after its last part.
    const size_t to = std::min(message_ids.size(), from + max_rows);
    const std::vector<std::string> part(message_ids.begin() + static_cast<ptrdiff_t>(from),
                                        message_ids.begin() + static_cast<ptrdiff_t>(to));
    Failpoint(options_.record_failpoint);
    auto changed = outbox_.RecordAcks(part);
    if (!changed.ok()) {
      // This chunk not (wholly) marked: its deliveries are held and tried
      // again; what an earlier part marked is harmless to mark again.
      LogError("mark_sent_failed",
               {KV("messages", part.size()), KV("error", changed.status().message())});
      store_refused_ = true;
      return changed.status();
    }
    total.late += changed->late;
    total.closed += changed->closed;
  }
  acknowledged_.Add(total.changed());
  late_.Add(total.late);
  harmless_.Add(static_cast<int64_t>(message_ids.size()) - total.changed());
  if (total.late > 0) {
    LogInfo("late_ack", {KV("rows", total.late), KV("first_message_id", message_ids.front()),
                         KV("effect", "FAILED rows turned SENT")});
  }
  return acks_.Ack(last_tag, /*multiple=*/true);
}

}  // namespace outbox
