#include "shared/outbox/internal/republisher.h"

#include <utility>

#include "shared/observability/internal/trace.h"
#include "shared/observability/log.h"
#include "shared/runtime/internal/failpoint.h"

namespace outbox {

Republisher::Republisher(RecoveryRepository& outbox, MessagePublisher& broker, LeaseKeeper& lease,
                         RecoveryAlerts& alerts, const Clock& clock, MetricsRegistry& metrics,
                         RecoveryOptions options)
    : outbox_(outbox),
      broker_(broker),
      lease_(lease),
      alerts_(alerts),
      clock_(clock),
      options_(std::move(options)),
      limiter_(options_.rate_per_second, clock),
      republished_(metrics.AddCounter("outbox_republished_total", "messages re-published")),
      publish_failures_(
          metrics.AddCounter("outbox_republish_failures_total", "re-publishes not confirmed")),
      failed_(metrics.AddCounter("outbox_failed_total", "rows this instance turned FAILED")),
      note_failures_(StoreWriteFailures(metrics, "record_publish_failure")) {}

Republisher::Round Republisher::Run(int max_rows, const RetryPolicy* retry) {
  const int allowed = limiter_.Take(max_rows > 0 ? max_rows : options_.batch);
  if (allowed == 0) return {1, limiter_.UntilNext()};
  const int64_t now = clock_.NowMillis();
  auto claimed = Claim(allowed, now, retry != nullptr ? *retry : options_.retry);
  if (!claimed.ok()) return {};
  if (!claimed->to_publish.empty()) Failpoint(kFpRecoveryAfterClaimBeforePublish);
  for (const auto* rows : {&claimed->to_publish, &claimed->exhausted}) {
    for (const OutboxMessage& row : *rows) NoteBudget(row);
  }
  for (const OutboxMessage& row : claimed->exhausted) RaiseFailed(row);
  Round round;
  round.handled = static_cast<int>(claimed->to_publish.size() + claimed->exhausted.size());
  if (claimed->to_publish.empty()) return round;
  const bool all_confirmed = Publish(claimed->to_publish, now).empty();
  round.publish = all_confirmed ? Round::Publish::kConfirmed : Round::Publish::kFailed;
  return round;
}

absl::StatusOr<Claimed> Republisher::Claim(int limit, int64_t now_ms, const RetryPolicy& retry) {
  auto claimed = outbox_.ClaimDue(now_ms, limit, lease_.instance_id(), retry);
  if (absl::IsFailedPrecondition(claimed.status())) {
    lease_.Lost();
  } else if (!claimed.ok()) {
    LogError("claim_failed", {KV("error", claimed.status().message())});
  }
  return claimed;
}

void Republisher::NoteBudget(const OutboxMessage& row) {
  // A topic of recovery's policy replaced the row's budget at the claim.
  if (options_.retry.HasTopic(row.topic)) return;
  const int expected = options_.retry.max_attempts;
  if (row.max_attempts == expected ||
      !budgets_noted_.insert({row.topic, row.max_attempts}).second) {
    return;
  }
  LogWarning(
      "retry_policy_mismatch",
      {KV("topic", row.topic), KV("message_id", row.message_id),
       KV("row_max_attempts", row.max_attempts), KV("recovery_max_attempts", expected),
       KV("effect", "the row keeps the budget its producer stamped; recovery's delays apply"),
       KV("fix", "give the producer and recovery the same RetryPolicy")});
}

void Republisher::RaiseFailed(const OutboxMessage& row) {
  failed_.Add();
  LogWarning("message_failed",
             {KV(options_.biz_key_label, row.biz_key), KV("message_id", row.message_id),
              KV("trace_id", TraceIdOf(row.traceparent)), KV("attempts", row.attempts),
              KV("last_error", row.last_error)});
  alerts_.MessageFailed(row);
}

std::vector<std::string> Republisher::Publish(const std::vector<OutboxMessage>& rows,
                                              int64_t now_ms) {
  std::vector<OutgoingMessage> messages;
  messages.reserve(rows.size());
  for (const OutboxMessage& row : rows) messages.push_back(ToOutgoing(row));
  // A connection dropped between rounds must not cost the rows an attempt:
  // once more on a fresh one. Copies of a half-sent batch are harmless.
  auto confirms = OnceMoreOnAFreshConnection(broker_, [&] {
    return PublishAndConfirm(broker_, messages, options_.confirm_timeout, clock_);
  });
  std::vector<bool> confirmed(messages.size(), false);
  std::string error = "re-publish not confirmed by broker";
  if (confirms.ok()) {
    for (size_t i = 0; i < messages.size(); ++i) confirmed[i] = (*confirms)[i].ok;
  } else {
    error = std::string(confirms.status().message());
    broker_.Reset(confirms.status());
  }
  std::vector<std::string> failed;
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!confirmed[i]) failed.push_back(messages[i].message_id);
  }
  republished_.Add(static_cast<int64_t>(messages.size() - failed.size()));
  publish_failures_.Add(static_cast<int64_t>(failed.size()));
  if (!failed.empty()) NoteFailures(failed, error, now_ms);
  LogRows(rows, confirmed, failed.size());
  return failed;
}

void Republisher::NoteFailures(const std::vector<std::string>& failed, const std::string& error,
                               int64_t now_ms) {
  // Not retried: the claim already spent the attempt and set the next one,
  // so only last_error (shown to operators) misses this failure.
  const absl::Status s = outbox_.RecordPublishFailure(failed, error, now_ms);
  LogWarning("republish_failed", {KV("messages", failed.size()),
                                  KV("first_message_id", failed.front()), KV("error", error)});
  if (!s.ok()) {
    note_failures_.Add();
    LogWarning("record_publish_failure_failed",
               {KV("messages", failed.size()), KV("first_message_id", failed.front()),
                KV("error", s.message())});
  }
}

void Republisher::LogRows(const std::vector<OutboxMessage>& rows,
                          const std::vector<bool>& confirmed, size_t failed) const {
  for (size_t i = 0; i < rows.size(); ++i) {
    const OutboxMessage& row = rows[i];
    Log(confirmed[i] ? LogLevel::kInfo : LogLevel::kWarning,
        confirmed[i] ? "message_republished" : "message_republish_failed",
        {KV(options_.biz_key_label, row.biz_key), KV("message_id", row.message_id),
         KV("trace_id", TraceIdOf(row.traceparent)), KV("attempt", row.attempts)});
  }
  LogInfo("republished",
          {KV("messages", rows.size() - failed), KV("first_message_id", rows.front().message_id),
           KV("attempt", rows.front().attempts)});
}

}  // namespace outbox
