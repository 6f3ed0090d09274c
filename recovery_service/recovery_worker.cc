#include "recovery_service/recovery_worker.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shared/failpoint.h"
#include "shared/log.h"

namespace outbox::recovery {
namespace {
constexpr int kMaxArchiveBatchesPerPass = 20;
}  // namespace

RecoveryWorker::RecoveryWorker(RecoveryStore& store, AlertSink& alerts, const Clock& clock,
                               const AmqpUrl& url, const Topology& topology,
                               RecoveryOptions options)
    : store_(store),
      alerts_(alerts),
      clock_(clock),
      options_(std::move(options)),
      session_(url, topology, absl::StrCat("recovery-", options_.instance_id),
               [](AmqpConnection& c) { return c.EnableConfirms(); }, clock),
      limiter_(options_.rate_per_second, clock) {
  options_.policy.lease_holder = options_.instance_id;
}

RecoveryWorker::~RecoveryWorker() { Stop(); }

void RecoveryWorker::Start() { thread_ = std::thread([this] { Run(); }); }

void RecoveryWorker::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

void RecoveryWorker::Run() {
  const absl::Duration renew_every = options_.lease_ttl / 3;
  while (!stop_.HasBeenNotified()) {
    const absl::Time now = clock_.Now();
    if (!stats_.lease_held) {
      // A standby reads the lease (no write lock) and sleeps until it expires,
      // so it takes over right when the active instance's lease runs out.
      auto lease = store_.Lease();
      if (lease.ok() && !lease->holder.empty() && lease->holder != options_.instance_id) {
        const absl::Duration left = absl::FromUnixMillis(lease->expires_at) - now;
        if (left > absl::ZeroDuration()) {
          Sleep(std::min(left + absl::Milliseconds(5), renew_every));
          continue;
        }
      }
    }
    if (!stats_.lease_held || now - lease_renewed_ >= renew_every) {
      auto acquired = store_.TryAcquireLease(options_.instance_id, absl::ToUnixMillis(now),
                                             absl::ToInt64Milliseconds(options_.lease_ttl));
      if (!acquired.ok()) {
        LogWarning("lease_error", {KV("instance", options_.instance_id),
                                   KV("error", acquired.status().message())});
        Sleep(absl::Seconds(1));
        continue;
      }
      if (!*acquired) {
        if (stats_.lease_held) LogWarning("lease_lost", {KV("instance", options_.instance_id)});
        stats_.lease_held = false;
        continue;  // the standby path above waits for the expiry
      }
      if (!stats_.lease_held) LogInfo("lease_acquired", {KV("instance", options_.instance_id)});
      stats_.lease_held = true;
      lease_renewed_ = now;
    }
    if (now - last_housekeeping_ >= options_.housekeeping_every) {
      last_housekeeping_ = now;
      Housekeeping();
    }
    int handled = 0;
    auto conn = session_.Get();
    if (conn.ok()) {
      handled = Round(**conn);
    } else {
      ++consecutive_failures_;
    }
    if (consecutive_failures_ >= options_.max_publish_failures) {
      // Let another instance, perhaps with a better path to the broker, try.
      LogWarning("lease_yielded", {KV("instance", options_.instance_id),
                                   KV("consecutive_failures", consecutive_failures_)});
      ++stats_.lease_yields;
      store_.ReleaseLease(options_.instance_id, clock_.NowMillis()).IgnoreError();
      stats_.lease_held = false;
      consecutive_failures_ = 0;
      Sleep(options_.lease_ttl);
      continue;
    }
    if (handled == 0) Sleep(options_.idle_sleep);
  }
  if (stats_.lease_held) store_.ReleaseLease(options_.instance_id, clock_.NowMillis()).IgnoreError();
  stats_.lease_held = false;
}

int RecoveryWorker::Round(AmqpConnection& conn) {
  const int allowed = limiter_.Take(options_.batch);
  if (allowed == 0) {
    Sleep(limiter_.UntilNext());
    return 1;  // work may be waiting: no idle sleep
  }
  const int64_t now = clock_.NowMillis();
  auto claimed = store_.ClaimDue(now, allowed, options_.policy);
  if (!claimed.ok()) {
    if (absl::IsFailedPrecondition(claimed.status())) {
      LogWarning("lease_lost", {KV("instance", options_.instance_id)});
      stats_.lease_held = false;
    } else {
      LogError("claim_failed", {KV("error", claimed.status().message())});
    }
    return 0;
  }
  if (!claimed->to_publish.empty()) Failpoint(kFpRecoveryAfterClaimBeforePublish);
  for (const OutboxRow& row : claimed->exhausted) {
    ++stats_.failed;
    Alert alert;
    alert.name = "OutboxMessageFailed";
    alert.labels = {{"message_id", row.message_id}, {"payment_id", row.biz_key},
                    {"biz_type", row.biz_type}};
    alert.annotations = {
        {"summary", absl::StrCat("outbox message ", row.message_id, " for ", row.biz_type, " ",
                                 row.biz_key, " failed after ", row.attempts, " attempts")},
        {"attempts", absl::StrCat(row.attempts)},
        {"last_error", row.last_error.empty() ? "no acknowledgement from accounting" : row.last_error}};
    alerts_.Raise(std::move(alert));
  }
  if (claimed->to_publish.empty()) return static_cast<int>(claimed->exhausted.size());

  std::vector<OutgoingMessage> messages;
  messages.reserve(claimed->to_publish.size());
  for (const OutboxRow& row : claimed->to_publish) {
    messages.push_back({row.topic, row.message_id, row.payload, options_.reply_to, "PaymentCreated"});
  }
  auto confirmed = conn.PublishConfirmed(messages, options_.confirm_timeout);
  std::vector<std::string> failed;
  std::string error;
  if (!confirmed.ok()) {
    error = std::string(confirmed.status().message());
    session_.Reset(confirmed.status());
    for (const auto& m : messages) failed.push_back(m.message_id);
  } else {
    error = "re-publish not confirmed by broker";
    for (size_t i = 0; i < messages.size(); ++i) {
      if (!(*confirmed)[i]) failed.push_back(messages[i].message_id);
    }
  }
  stats_.republished += messages.size() - failed.size();
  stats_.publish_failures += failed.size();
  if (failed.empty()) {
    consecutive_failures_ = 0;
  } else {
    ++consecutive_failures_;
    store_.RecordPublishError(failed, error, now).IgnoreError();
    LogWarning("republish_failed", {KV("messages", failed.size()), KV("first_message_id", failed.front()),
                                    KV("error", error)});
  }
  LogInfo("republished", {KV("messages", messages.size() - failed.size()),
                          KV("first_message_id", messages.front().message_id),
                          KV("attempt", claimed->to_publish.front().attempts)});
  return static_cast<int>(messages.size() + claimed->exhausted.size());
}

void RecoveryWorker::Housekeeping() {
  const int64_t now = clock_.NowMillis();
  const int64_t cutoff = now - absl::ToInt64Milliseconds(options_.retention);
  for (int i = 0; i < kMaxArchiveBatchesPerPass && !stop_.HasBeenNotified(); ++i) {
    auto moved = store_.ArchiveSent(cutoff, options_.archive_batch);
    if (!moved.ok()) {
      LogWarning("archive_failed", {KV("error", moved.status().message())});
      break;
    }
    stats_.archived += *moved;
    if (*moved < options_.archive_batch) break;
  }
  auto backlog = store_.CountSendingOlderThan(now - absl::ToInt64Milliseconds(options_.backlog_age));
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
