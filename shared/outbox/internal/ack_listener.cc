#include "shared/outbox/internal/ack_listener.h"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <utility>

#include "shared/base/status_macros.h"
#include "shared/observability/internal/trace.h"
#include "shared/observability/log.h"
#include "shared/outbox/internal/dead_letter.h"
#include "shared/runtime/internal/failpoint.h"

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
      record_failures_(StoreWriteFailures(metrics, "record_acks")),
      create_to_sent_(metrics.AddDurationHistogram(
          "outbox_create_to_sent_seconds",
          "from a message's commit to its outbox row turning SENT (the consumer's reply "
          "applied)")),
      clock_(options_.clock ? *options_.clock : SystemClock::Get()),
      backoff_(clock_, options_.store_retry_max) {
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
  if (!waiting_.empty()) {
    absl::Status s = RetryWaiting();
    if (!s.ok()) {
      acks_.Reset(s);  // the broker requeues what was held
      waiting_.clear();
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
    waiting_.clear();
  }
  return true;
}

absl::Status AckListener::RetryWaiting() {
  // Waiting on the connection keeps it alive and takes what else arrives.
  const size_t prefetch = static_cast<size_t>(std::max(1, options_.prefetch));
  ASSIGN_OR_RETURN(
      std::vector<Delivery> more,
      acks_.Next(waiting_.size() < prefetch ? prefetch - waiting_.size() : 1, backoff_.WaitNow()));
  waiting_.insert(waiting_.end(), std::make_move_iterator(more.begin()),
                  std::make_move_iterator(more.end()));
  if (!backoff_.Due()) return absl::OkStatus();
  std::vector<Delivery> batch;
  batch.swap(waiting_);
  return HandleBatch(batch);
}

void AckListener::BackOff(const std::vector<Delivery>& deliveries, uint64_t acked_through,
                          const std::set<uint64_t>& dead_lettered, const absl::Status& why) {
  record_failures_.Add();
  for (const Delivery& d : deliveries) {
    if (d.delivery_tag > acked_through && !dead_lettered.count(d.delivery_tag)) {
      waiting_.push_back(d);
    }
  }
  const absl::Duration pause = backoff_.Refused();
  LogWarning("replies_held", {KV("queue", options_.queue), KV("messages", waiting_.size()),
                              KV("retry_in", absl::FormatDuration(pause)),
                              KV("failures", backoff_.failures()), KV("error", why.message())});
}

absl::Status AckListener::HandleBatch(const std::vector<Delivery>& deliveries) {
  replies_.Add(static_cast<int64_t>(deliveries.size()));
  const size_t max_rows = MaxRowsPerCommit();
  std::vector<Decoded> chunk;
  size_t chunk_rows = 0;
  uint64_t acked_through = 0;  // settled (rejected) tags must not be acked again
  std::set<uint64_t> dead_lettered;
  absl::Status held;  // not OK: the store cannot write, what is not acked is held
  for (const Delivery& d : deliveries) {
    // A forged acknowledgement would mark a row SENT that was never booked.
    absl::Status signature = CheckSignature(options_.keys, d);
    auto acks = signature.ok() ? CatchThrown("the reply decoder", [&] { return decode_(d); })
                               : absl::StatusOr<std::vector<Acknowledgement>>(signature);
    if (!acks.ok()) {
      if (!signature.ok()) unauthenticated_.Add();
      RETURN_IF_ERROR(DeadLetter(acks_, dead_lettered_, options_.queue, d,
                                 std::string(acks.status().message())));
      dead_lettered.insert(d.delivery_tag);
      continue;
    }
    // Whole replies per chunk: this one would overflow it, so the chunk
    // so far is recorded and acked first.
    if (chunk_rows > 0 && chunk_rows + acks->size() > max_rows) {
      RETURN_IF_ERROR(RecordReplies(chunk, &acked_through, &dead_lettered, &held));
      if (!held.ok()) break;
      chunk.clear();
      chunk_rows = 0;
    }
    for (const Acknowledgement& ack : *acks) {
      if (!ack.rejected_reason.empty()) {
        LogWarning("message_rejected",
                   {KV(options_.biz_key_label, ack.biz_key), KV("message_id", ack.message_id),
                    KV("reason", ack.rejected_reason)});
      } else if (LogEnabled(LogLevel::kDebug)) {
        LogDebug(
            "ack_received",
            {KV(options_.biz_key_label, ack.biz_key), KV("message_id", ack.message_id),
             KV("trace_id", TraceIdOf(ack.traceparent.empty() ? d.traceparent : ack.traceparent)),
             KV("duplicate", ack.duplicate)});
      }
    }
    chunk_rows += acks->size();
    chunk.push_back({&d, *std::move(acks)});
  }
  if (held.ok() && !chunk.empty()) {
    RETURN_IF_ERROR(RecordReplies(chunk, &acked_through, &dead_lettered, &held));
  }
  if (!held.ok()) BackOff(deliveries, acked_through, dead_lettered, held);
  return absl::OkStatus();
}

absl::Status AckListener::RecordReplies(const std::vector<Decoded>& chunk, uint64_t* acked_through,
                                        std::set<uint64_t>* dead_lettered, absl::Status* held) {
  absl::Status refused;
  RETURN_IF_ERROR(RecordChunk(chunk, &refused));
  if (refused.ok()) {
    *acked_through = chunk.back().delivery->delivery_tag;
    return absl::OkStatus();
  }
  if (StoreUnavailable(refused)) {
    *held = refused;
    return absl::OkStatus();
  }
  // Refused for another reason, which would hold every reply behind it for
  // good: each reply is recorded alone, and the one refused is dead-lettered.
  if (chunk.size() > 1) {
    LogWarning("replies_not_recorded", {KV("queue", options_.queue), KV("messages", chunk.size()),
                                        KV("error", refused.message())});
  }
  for (const Decoded& reply : chunk) {
    if (chunk.size() > 1) {
      refused = absl::OkStatus();
      RETURN_IF_ERROR(RecordChunk({reply}, &refused));
      if (refused.ok()) {
        *acked_through = reply.delivery->delivery_tag;
        continue;
      }
      if (StoreUnavailable(refused)) {
        *held = refused;
        return absl::OkStatus();
      }
    }
    RETURN_IF_ERROR(DeadLetter(acks_, dead_lettered_, options_.queue, *reply.delivery,
                               std::string(refused.message())));
    dead_lettered->insert(reply.delivery->delivery_tag);
  }
  return absl::OkStatus();
}

size_t AckListener::MaxRowsPerCommit() const {
  return static_cast<size_t>(std::max(1, options_.max_rows_per_commit));
}

absl::Status AckListener::RecordChunk(const std::vector<Decoded>& chunk, absl::Status* refused) {
  std::vector<std::string> message_ids;
  std::vector<Rejection> rejects;
  for (const Decoded& reply : chunk) {
    for (const Acknowledgement& ack : reply.acks) {
      if (ack.rejected_reason.empty()) {
        message_ids.push_back(ack.message_id);
      } else {
        rejects.push_back({ack.message_id, ack.rejected_reason, ack.answered_at});
      }
    }
  }
  const size_t max_rows = MaxRowsPerCommit();
  if (!rejects.empty()) {
    Failpoint(options_.record_failpoint);
    auto closed = CatchThrown("RecordRejects", [&] { return outbox_.RecordRejects(rejects); });
    if (!closed.ok()) {
      LogError("mark_rejected_failed",
               {KV("messages", rejects.size()), KV("error", closed.status().message())});
      *refused = closed.status();
      return absl::OkStatus();
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
    auto changed = CatchThrown("RecordAcks", [&] { return outbox_.RecordAcks(part); });
    if (!changed.ok()) {
      // This chunk not (wholly) marked: its deliveries are held or tried
      // one by one; what an earlier part marked is harmless to mark again.
      LogError("mark_sent_failed",
               {KV("messages", part.size()), KV("error", changed.status().message())});
      *refused = changed.status();
      return absl::OkStatus();
    }
    total.late += changed->late;
    total.closed += changed->closed;
    for (int64_t ms : changed->create_to_sent_ms) create_to_sent_.Observe(absl::Milliseconds(ms));
  }
  backoff_.Succeeded();
  acknowledged_.Add(total.changed());
  late_.Add(total.late);
  harmless_.Add(static_cast<int64_t>(message_ids.size()) - total.changed());
  if (total.late > 0) {
    LogInfo("late_ack", {KV("rows", total.late), KV("first_message_id", message_ids.front()),
                         KV("effect", "FAILED rows turned SENT")});
  }
  return acks_.Ack(chunk.back().delivery->delivery_tag, /*multiple=*/true);
}

}  // namespace outbox
