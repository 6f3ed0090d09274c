#include "shared/outbox/recovery_loop.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shared/observability/log.h"
#include "shared/observability/trace.h"
#include "shared/runtime/failpoint.h"

namespace outbox {
namespace {
constexpr int kMaxArchiveBatchesPerPass = 20;
constexpr int kDeferBatch = 1000;            // rows pushed back per transaction
constexpr int kMaxDeferBatchesPerRound = 100;
constexpr int kMaxFailedAlerts = 1000;       // FAILED rows alerted one by one
constexpr absl::Duration kIdlePollSlice = absl::Milliseconds(250);

Alert FailedAlert(const OutboxMessage& row) {
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
  return alert;
}

}  // namespace

const char* DeliveryHoldName(DeliveryHold hold) {
  switch (hold) {
    case DeliveryHold::kConsumerDown: return "consumer_down";
    case DeliveryHold::kQueueBacklog: return "queue_backlog";
    case DeliveryHold::kNone: break;
  }
  return "";
}

DeliveryHold HoldFor(const QueueState& queue, int64_t max_ready, DeliveryHold current) {
  if (queue.consumers == 0) return DeliveryHold::kConsumerDown;
  const int64_t limit = current == DeliveryHold::kNone ? max_ready : max_ready / 10;
  if (queue.ready > limit) return DeliveryHold::kQueueBacklog;
  return DeliveryHold::kNone;
}

absl::Status RecoveryOptions::Validate() const {
  if (batch < 1 || rate_per_second <= 0 || lease_ttl <= absl::ZeroDuration() ||
      max_publish_failures < 1 || instance_id.empty()) {
    return absl::InvalidArgumentError(
        "need recovery_batch >= 1, recovery_rate > 0, recovery_lease_ttl > 0, "
        "recovery_max_publish_failures >= 1 and a non-empty recovery_instance_id");
  }
  if (hold_queue_depth < 0) {
    return absl::InvalidArgumentError("recovery_hold_queue_depth must be >= 0");
  }
  if (alert_resend <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("alert_resend must be positive");
  }
  return retry.Validate();
}

RecoveryLoop::RecoveryLoop(RecoveryRepository& outbox, MessagePublisher& broker,
                               AlertSink& alerts, const Clock& clock, MetricsRegistry& metrics,
                               RecoveryOptions options)
    : outbox_(outbox),
      broker_(broker),
      clock_(clock),
      options_(std::move(options)),
      limiter_(options_.rate_per_second, clock),
      republished_(metrics.AddCounter("outbox_republished_total", "messages re-published")),
      publish_failures_(metrics.AddCounter("outbox_republish_failures_total",
                                           "re-publishes not confirmed")),
      failed_(metrics.AddCounter("outbox_failed_total", "rows this instance turned FAILED")),
      deferred_(metrics.AddCounter(
          "outbox_deferred_total",
          "due rows held back without spending an attempt (queue not consumed or far behind)")),
      archived_(metrics.AddCounter("outbox_archived_total", "SENT rows moved to the archive")),
      lease_yields_(metrics.AddCounter("outbox_lease_yields_total",
                                       "times the lease was given up after failed rounds")),
      failed_alerts_(alerts, clock, options_.alert_resend),
      delivery_alert_(alerts, clock, options_.alert_resend),
      backlog_alert_(alerts, clock, options_.alert_resend),
      dead_letter_alerts_(alerts, clock, options_.alert_resend) {
  metrics.AddGauge("outbox_lease_held", "1 when this instance is the active one", "",
                   [this] { return lease_held_.load() ? 1 : 0; });
  metrics.AddGauge("outbox_delivery_held",
                   "1 while re-publishing is held (nobody consumes the queue or it is far behind)",
                   "", [this] { return hold_.load() != 0 ? 1 : 0; });
  const std::string queue = absl::StrCat("queue=\"", options_.pay_queue, "\"");
  metrics.AddGauge("outbox_queue_ready", "messages ready in the queue, as last seen", queue,
                   [this] { return static_cast<double>(queue_ready_.load()); });
  metrics.AddGauge("outbox_queue_consumers", "consumers of the queue, as last seen", queue,
                   [this] { return static_cast<double>(queue_consumers_.load()); });
  metrics.AddGauge("outbox_alerts_active", "alerts this instance holds active", "",
                   [this] { return static_cast<double>(active_alerts_.load()); });
  RegisterLinkMetrics(metrics, broker_, "recovery");
}

RecoveryLoop::~RecoveryLoop() { Stop(); }

void RecoveryLoop::Start() {
  thread_.Start([this] { return Step(); });
}

void RecoveryLoop::Stop() { thread_.Stop(); }

bool RecoveryLoop::HoldLease(absl::Time now) {
  const absl::Duration renew_every = options_.lease_ttl / 3;
  if (!lease_held_) {
    // A standby reads the lease (no write lock) and sleeps until it expires,
    // so it takes over right when the active instance's lease runs out.
    auto lease = outbox_.Lease();
    if (lease.ok() && !lease->holder.empty() && lease->holder != options_.instance_id) {
      const absl::Duration left = absl::FromUnixMillis(lease->expires_at) - now;
      if (left > absl::ZeroDuration()) {
        IdleWait(std::min(left + absl::Milliseconds(5), renew_every));
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

bool RecoveryLoop::Step() {
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
  if (ConnectLive(broker_).ok()) {
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
  if (handled == 0) IdleWait(options_.idle_sleep);
  return true;
}

void RecoveryLoop::IdleWait(absl::Duration d) {
  // Counted in slices rather than read off the clock, so a test's manual
  // clock cannot keep it waiting.
  const int64_t slices = (d + kIdlePollSlice - absl::Nanoseconds(1)) / kIdlePollSlice;
  for (int64_t i = 0; i < slices && !thread_.stopping(); ++i) {
    const absl::Duration slice = std::min(kIdlePollSlice, d - kIdlePollSlice * i);
    if (!broker_.connected()) {
      thread_.Sleep(slice);
      continue;
    }
    absl::Status s = broker_.Poll(slice);
    if (!s.ok()) broker_.Reset(s);  // logged and counted; replaced before the next use
  }
}

int RecoveryLoop::Round() {
  auto queue = OnceMoreOnAFreshConnection(broker_, [&]() -> absl::StatusOr<QueueState> {
    const std::vector<std::string> one = {options_.pay_queue};
    const auto& queues = options_.pay_queue_shards.empty() ? one : options_.pay_queue_shards;
    QueueState total;
    for (size_t i = 0; i < queues.size(); ++i) {
      auto state = broker_.Inspect(queues[i]);
      // payment_service declares the queue (recovery's broker user may not):
      // until it has, nobody consumes it.
      if (absl::IsNotFound(state.status())) return QueueState{0, 0};
      if (!state.ok()) return state;
      total.ready += state->ready;
      total.consumers = i == 0 ? state->consumers : std::min(total.consumers, state->consumers);
    }
    return total;
  });
  if (!queue.ok()) {
    ++consecutive_failures_;
    LogWarning("queue_inspect_failed",
               {KV("queue", options_.pay_queue), KV("error", queue.status().message())});
    return 0;
  }
  queue_ready_ = queue->ready;
  queue_consumers_ = queue->consumers;
  const DeliveryHold hold = HoldFor(*queue, options_.hold_queue_depth, this->hold());
  UpdateHold(hold, *queue);
  CountAlerts();
  if (hold != DeliveryHold::kNone || !lease_held_) return 0;
  return Republish();
}

int64_t RecoveryLoop::DeferAllDue() {
  int64_t total = 0;
  for (int i = 0; i < kMaxDeferBatchesPerRound && !thread_.stopping(); ++i) {
    auto n = outbox_.DeferDue(clock_.NowMillis(), kDeferBatch, options_.instance_id,
                              options_.retry);
    if (!n.ok()) {
      if (absl::IsFailedPrecondition(n.status())) {
        LogWarning("lease_lost", {KV("instance", options_.instance_id)});
        lease_held_ = false;
      } else {
        LogError("defer_failed", {KV("error", n.status().message())});
      }
      break;
    }
    total += *n;
    if (*n < kDeferBatch) break;
  }
  deferred_.Add(total);
  return total;
}

void RecoveryLoop::UpdateHold(DeliveryHold hold, const QueueState& queue) {
  const DeliveryHold before = this->hold();
  if (hold == DeliveryHold::kNone) {
    if (before != DeliveryHold::kNone) {
      // Consumers are back: the copies waiting in the queue are being
      // delivered now. Give every due row one more backoff step before
      // re-publishing, or each would be sent a second time for nothing.
      const int64_t deferred = DeferAllDue();
      LogInfo("delivery_resumed", {KV("queue", options_.pay_queue), KV("was", DeliveryHoldName(before)),
                                   KV("ready", queue.ready), KV("consumers", queue.consumers),
                                   KV("deferred", deferred)});
      hold_ = 0;
    }
    delivery_alert_.Clear();
    return;
  }
  // Due rows are left as they are while held: nothing claims them, and
  // pushing each one a backoff step every few seconds would rewrite the whole
  // backlog over and over, under the write lock payment_service's ack
  // listener needs to drain it. They get their step when the hold ends.
  auto waiting = outbox_.CountSendingOlderThan(std::numeric_limits<int64_t>::max());
  if (before != hold) {
    LogWarning("delivery_held",
               {KV("reason", DeliveryHoldName(hold)), KV("queue", options_.pay_queue),
                KV("ready", queue.ready), KV("consumers", queue.consumers),
                KV("rows_waiting", waiting.ok() ? *waiting : -1)});
  }
  hold_ = static_cast<int>(hold);
  if (!waiting.ok()) return;  // keep the alert as it is
  if (*waiting == 0) {        // nothing is kept from its consumer: nothing to alert on
    delivery_alert_.Clear();
    return;
  }
  Alert alert;
  const bool down = hold == DeliveryHold::kConsumerDown;
  alert.name = down ? "OutboxConsumerDown" : "OutboxQueueBacklog";
  alert.severity = down ? "critical" : "warning";
  alert.labels = {{"queue", options_.pay_queue}};
  alert.annotations = {
      {"summary",
       down ? absl::StrCat("nobody consumes ", options_.pay_queue, ": ", *waiting,
                           " outbox rows wait; re-publishing is held (no attempts spent)")
            : absl::StrCat(options_.pay_queue, " holds ", queue.ready, " ready messages (over ",
                           options_.hold_queue_depth, "): ", *waiting,
                           " outbox rows wait; re-publishing is held (no attempts spent)")},
      {"depth", absl::StrCat(queue.ready)},
      {"consumers", absl::StrCat(queue.consumers)},
      {"rows_waiting", absl::StrCat(*waiting)}};
  delivery_alert_.Update({std::move(alert)});
}

void RecoveryLoop::RaiseFailed(const OutboxMessage& row) {
  failed_.Add();
  LogWarning("message_failed", {KV("payment_id", row.biz_key), KV("message_id", row.message_id),
                                KV("trace_id", TraceIdOf(row.traceparent)),
                                KV("attempts", row.attempts), KV("last_error", row.last_error)});
  failed_alerts_.Add(FailedAlert(row));
}

int RecoveryLoop::Republish() {
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
  CountAlerts();
  if (claimed->to_publish.empty()) return static_cast<int>(claimed->exhausted.size());

  std::vector<OutgoingMessage> messages;
  messages.reserve(claimed->to_publish.size());
  for (const OutboxMessage& row : claimed->to_publish) messages.push_back(ToOutgoing(row));
  // A connection dropped between rounds must not cost the rows an attempt:
  // once more on a fresh one. Copies of a half-sent batch are harmless.
  auto confirms = OnceMoreOnAFreshConnection(broker_, [&] {
    return PublishAndConfirm(broker_, messages, options_.confirm_timeout, clock_);
  });
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
  for (size_t i = 0; i < messages.size(); ++i) {
    const OutboxMessage& row = claimed->to_publish[i];
    const bool ok = confirms.ok() && (*confirms)[i].ok;
    Log(ok ? LogLevel::kInfo : LogLevel::kWarning, ok ? "message_republished" : "message_republish_failed",
        {KV("payment_id", row.biz_key), KV("message_id", row.message_id),
         KV("trace_id", TraceIdOf(row.traceparent)), KV("attempt", row.attempts)});
  }
  LogInfo("republished", {KV("messages", messages.size() - failed.size()),
                          KV("first_message_id", messages.front().message_id),
                          KV("attempt", claimed->to_publish.front().attempts)});
  return static_cast<int>(messages.size() + claimed->exhausted.size());
}

void RecoveryLoop::Housekeeping() {
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

  // Each alert family below is set to what is true now: an alert whose
  // cause is gone (a late acknowledgement, a re-drive, a drained DLQ)
  // resolves here.
  auto backlog =
      outbox_.CountSendingOlderThan(now - absl::ToInt64Milliseconds(options_.backlog_age));
  if (backlog.ok()) {
    std::vector<Alert> active;
    if (*backlog > options_.backlog_threshold) {
      Alert alert;
      alert.name = "OutboxBacklog";
      alert.severity = "warning";
      alert.annotations = {
          {"summary", absl::StrCat(*backlog, " outbox rows have been SENDING for more than ",
                                   absl::FormatDuration(options_.backlog_age))},
          {"count", absl::StrCat(*backlog)},
          {"threshold", absl::StrCat(options_.backlog_threshold)}};
      active.push_back(std::move(alert));
    }
    backlog_alert_.Update(std::move(active));
  }

  auto failed = outbox_.ListFailed(kMaxFailedAlerts);
  if (failed.ok()) {
    std::vector<Alert> active;
    for (const OutboxMessage& row : *failed) active.push_back(FailedAlert(row));
    // Past the cap some FAILED rows were not listed: resolve nothing then.
    failed_alerts_.Update(std::move(active), failed->size() < static_cast<size_t>(kMaxFailedAlerts));
  }

  std::vector<Alert> parked;
  bool seen_all = true;
  for (const std::string& queue : options_.dead_letter_sources) {
    const std::string dlq = DeadLetterQueueOf(queue);
    auto state = broker_.Inspect(dlq);  // UNAVAILABLE while not connected
    if (absl::IsNotFound(state.status())) continue;  // not declared yet: nothing parked
    if (!state.ok()) {
      seen_all = false;
      continue;
    }
    if (state->ready == 0) continue;
    Alert alert;
    alert.name = "OutboxDeadLetters";
    alert.severity = "warning";
    alert.labels = {{"queue", dlq}};
    alert.annotations = {
        {"summary", absl::StrCat(state->ready, " messages dead-lettered from ", queue,
                                 " wait in ", dlq, " (ListDeadLetters / RedriveDeadLetters)")},
        {"depth", absl::StrCat(state->ready)}};
    parked.push_back(std::move(alert));
  }
  dead_letter_alerts_.Update(std::move(parked), seen_all);
  CountAlerts();
}

void RecoveryLoop::CountAlerts() {
  active_alerts_ = static_cast<int64_t>(failed_alerts_.active() + delivery_alert_.active() +
                                        backlog_alert_.active() + dead_letter_alerts_.active());
}

}  // namespace outbox
