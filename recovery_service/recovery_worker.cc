#include "recovery_service/recovery_worker.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shared/observability/log.h"
#include "shared/runtime/failpoint.h"

namespace outbox::recovery {
namespace {
constexpr int kMaxArchiveBatchesPerPass = 20;
}  // namespace

absl::Status RecoveryOptions::Validate() const {
  if (batch < 1 || rate_per_second <= 0 || lease_ttl <= absl::ZeroDuration() ||
      max_publish_failures < 1 || instance_id.empty()) {
    return absl::InvalidArgumentError(
        "need recovery_batch >= 1, recovery_rate > 0, recovery_lease_ttl > 0, "
        "recovery_max_publish_failures >= 1 and a non-empty recovery_instance_id");
  }
  return retry.Validate();
}

RecoveryWorker::RecoveryWorker(RecoveryRepository& outbox, MessagePublisher& broker,
                               AlertSink& alerts, const Clock& clock, MetricsRegistry& metrics,
                               RecoveryOptions options)
    : outbox_(outbox),
      broker_(broker),
      alerts_(alerts),
      clock_(clock),
      options_(std::move(options)),
      limiter_(options_.rate_per_second, clock),
      republished_(metrics.AddCounter("outbox_republished_total", "messages re-published")),
      publish_failures_(metrics.AddCounter("outbox_republish_failures_total",
                                           "re-publishes not confirmed")),
      failed_(metrics.AddCounter("outbox_failed_total", "rows this instance turned FAILED")),
      archived_(metrics.AddCounter("outbox_archived_total", "SENT rows moved to the archive")),
      lease_yields_(metrics.AddCounter("outbox_lease_yields_total",
                                       "times the lease was given up after failed rounds")) {
  metrics.AddGauge("outbox_lease_held", "1 when this instance is the active one", "",
                   [this] { return lease_held_.load() ? 1 : 0; });
}

RecoveryWorker::~RecoveryWorker() { Stop(); }

void RecoveryWorker::Start() {
  thread_.Start([this] { return Step(); });
}

void RecoveryWorker::Stop() { thread_.Stop(); }

bool RecoveryWorker::HoldLease(absl::Time now) {
  const absl::Duration renew_every = options_.lease_ttl / 3;
  if (!lease_held_) {
    // A standby reads the lease (no write lock) and sleeps until it expires,
    // so it takes over right when the active instance's lease runs out.
    auto lease = outbox_.Lease();
    if (lease.ok() && !lease->holder.empty() && lease->holder != options_.instance_id) {
      const absl::Duration left = absl::FromUnixMillis(lease->expires_at) - now;
      if (left > absl::ZeroDuration()) {
        thread_.Sleep(std::min(left + absl::Milliseconds(5), renew_every));
        return false;
      }
    }
  }
  if (lease_held_ && now - lease_renewed_ < renew_every) return true;
  auto acquired = outbox_.TryAcquireLease(options_.instance_id, absl::ToUnixMillis(now),
                                          absl::ToInt64Milliseconds(options_.lease_ttl));
  if (!acquired.ok()) {
    LogWarning("lease_error", {KV("instance", options_.instance_id),
                               KV("error", acquired.status().message())});
    thread_.Sleep(absl::Seconds(1));
    return false;
  }
  if (!*acquired) {
    if (lease_held_) LogWarning("lease_lost", {KV("instance", options_.instance_id)});
    lease_held_ = false;
    return false;  // the standby path above waits for the expiry
  }
  if (!lease_held_) LogInfo("lease_acquired", {KV("instance", options_.instance_id)});
  lease_held_ = true;
  lease_renewed_ = now;
  return true;
}

bool RecoveryWorker::Step() {
  if (thread_.stopping()) {
    if (lease_held_) outbox_.ReleaseLease(options_.instance_id, clock_.NowMillis()).IgnoreError();
    lease_held_ = false;
    return false;
  }
  const absl::Time now = clock_.Now();
  if (!HoldLease(now)) return true;
  if (now - last_housekeeping_ >= options_.housekeeping_every) {
    last_housekeeping_ = now;
    Housekeeping();
  }
  int handled = 0;
  if (broker_.Connect().ok()) {
    handled = Round();
  } else {
    ++consecutive_failures_;
  }
  if (consecutive_failures_ >= options_.max_publish_failures) {
    // Let another instance, perhaps with a better path to the broker, try.
    LogWarning("lease_yielded", {KV("instance", options_.instance_id),
                                 KV("consecutive_failures", consecutive_failures_)});
    lease_yields_.Add();
    outbox_.ReleaseLease(options_.instance_id, clock_.NowMillis()).IgnoreError();
    lease_held_ = false;
    consecutive_failures_ = 0;
    thread_.Sleep(options_.lease_ttl);
    return true;
  }
  if (handled == 0) thread_.Sleep(options_.idle_sleep);
  return true;
}

void RecoveryWorker::RaiseFailed(const OutboxMessage& row) {
  failed_.Add();
  Alert alert;
  alert.name = "OutboxMessageFailed";
  alert.labels = {{"message_id", row.message_id}, {"payment_id", row.biz_key},
                  {"biz_type", row.biz_type}};
  alert.annotations = {
      {"summary", absl::StrCat("outbox message ", row.message_id, " for ", row.biz_type, " ",
                               row.biz_key, " failed after ", row.attempts, " attempts")},
      {"attempts", absl::StrCat(row.attempts)},
      {"last_error",
       row.last_error.empty() ? "no acknowledgement from accounting" : row.last_error}};
  alerts_.Raise(std::move(alert));
}

int RecoveryWorker::Round() {
  const int allowed = limiter_.Take(options_.batch);
  if (allowed == 0) {
    thread_.Sleep(limiter_.UntilNext());
    return 1;  // work may be waiting: no idle sleep
  }
  const int64_t now = clock_.NowMillis();
  auto claimed = outbox_.ClaimDue(now, allowed, options_.instance_id, options_.retry);
  if (!claimed.ok()) {
    if (absl::IsFailedPrecondition(claimed.status())) {
      LogWarning("lease_lost", {KV("instance", options_.instance_id)});
      lease_held_ = false;
    } else {
      LogError("claim_failed", {KV("error", claimed.status().message())});
    }
    return 0;
  }
  if (!claimed->to_publish.empty()) Failpoint(kFpRecoveryAfterClaimBeforePublish);
  for (const OutboxMessage& row : claimed->exhausted) RaiseFailed(row);
  if (claimed->to_publish.empty()) return static_cast<int>(claimed->exhausted.size());

  std::vector<OutgoingMessage> messages;
  messages.reserve(claimed->to_publish.size());
  for (const OutboxMessage& row : claimed->to_publish) messages.push_back(ToOutgoing(row));
  auto confirms = PublishAndConfirm(broker_, messages, options_.confirm_timeout, clock_);
  std::vector<std::string> failed;
  std::string error;
  if (!confirms.ok()) {
    error = std::string(confirms.status().message());
    broker_.Reset(confirms.status());
    for (const auto& m : messages) failed.push_back(m.message_id);
  } else {
    error = "re-publish not confirmed by broker";
    for (size_t i = 0; i < messages.size(); ++i) {
      if (!(*confirms)[i].ok) failed.push_back(messages[i].message_id);
    }
  }
  republished_.Add(static_cast<int64_t>(messages.size() - failed.size()));
  publish_failures_.Add(static_cast<int64_t>(failed.size()));
  if (failed.empty()) {
    consecutive_failures_ = 0;
  } else {
    ++consecutive_failures_;
    outbox_.RecordPublishFailure(failed, error, now).IgnoreError();
    LogWarning("republish_failed", {KV("messages", failed.size()),
                                    KV("first_message_id", failed.front()), KV("error", error)});
  }
  LogInfo("republished", {KV("messages", messages.size() - failed.size()),
                          KV("first_message_id", messages.front().message_id),
                          KV("attempt", claimed->to_publish.front().attempts)});
  return static_cast<int>(messages.size() + claimed->exhausted.size());
}

void RecoveryWorker::Housekeeping() {
  const int64_t now = clock_.NowMillis();
  const int64_t cutoff = now - absl::ToInt64Milliseconds(options_.retention);
  for (int i = 0; i < kMaxArchiveBatchesPerPass && !thread_.stopping(); ++i) {
    auto moved = outbox_.ArchiveSent(cutoff, options_.archive_batch);
    if (!moved.ok()) {
      LogWarning("archive_failed", {KV("error", moved.status().message())});
      break;
    }
    archived_.Add(*moved);
    if (*moved < options_.archive_batch) break;
  }
  auto backlog =
      outbox_.CountSendingOlderThan(now - absl::ToInt64Milliseconds(options_.backlog_age));
  if (!backlog.ok()) return;
  if (*backlog > options_.backlog_threshold && !backlog_alerted_) {
    backlog_alerted_ = true;  // one alert per episode, not one per loop
    Alert alert;
    alert.name = "OutboxBacklog";
    alert.severity = "warning";
    alert.annotations = {
        {"summary", absl::StrCat(*backlog, " outbox rows have been SENDING for more than ",
                                 absl::FormatDuration(options_.backlog_age))},
        {"count", absl::StrCat(*backlog)},
        {"threshold", absl::StrCat(options_.backlog_threshold)}};
    alerts_.Raise(std::move(alert));
  } else if (*backlog <= options_.backlog_threshold && backlog_alerted_) {
    backlog_alerted_ = false;
    LogInfo("backlog_cleared", {KV("count", *backlog)});
  }
}

}  // namespace outbox::recovery
