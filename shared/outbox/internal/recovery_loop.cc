#include "shared/outbox/internal/recovery_loop.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "shared/observability/log.h"

namespace outbox {
namespace {
constexpr absl::Duration kIdlePollSlice = absl::Milliseconds(250);

// `retry` with every delay the longest: a row re-published while its
// producer is away waits for the producer's return, not for a retry.
RetryPolicy AwayRetry(RetryPolicy retry) {
  retry.base_delay = retry.max_delay;
  for (auto& [topic, policy] : retry.topics) policy.base_delay = retry.max_delay;
  return retry;
}
}  // namespace

RecoveryLoop::RecoveryLoop(RecoveryRepository& outbox, MessagePublisher& broker, AlertSink& alerts,
                           const Clock& clock, MetricsRegistry& metrics, RecoveryOptions options)
    : broker_(broker),
      outbox_(outbox),
      clock_(clock),
      options_(std::move(options)),
      away_retry_(AwayRetry(options_.retry)),
      lease_(outbox, metrics, options_.instance_id, options_.lease_ttl),
      alerts_(alerts, clock, options_),
      hold_(outbox, lease_, alerts, clock, metrics, options_,
            [this] { return thread_.stopping(); }),
      republisher_(outbox, broker, lease_, alerts_, clock, metrics, options_),
      archiver_(outbox, clock, metrics,
                Retention{options_.retention, options_.archive_retention, options_.audit_retention,
                          options_.archive_batch},
                [this] { return thread_.stopping(); }),
      round_duration_(metrics.AddDurationHistogram(
          "outbox_recovery_round_seconds",
          "one recovery round: the queue looked at, then due rows held or re-published")),
      connect_failures_(metrics.AddCounter(
          "outbox_recovery_connect_failures_total",
          "recovery rounds that could not reach the broker (each error logged as "
          "recovery_broker_unreachable)")) {
  metrics.AddGauge("outbox_alerts_active", "alerts this instance holds active", {},
                   [this] { return static_cast<double>(active_alerts_.load()); });
  RegisterLinkMetrics(metrics, broker_, "recovery");
}

RecoveryLoop::~RecoveryLoop() {
  Stop();
}

void RecoveryLoop::Start() {
  thread_.Start([this] { return Step(); });
}

void RecoveryLoop::Stop() {
  thread_.Stop();
}

bool RecoveryLoop::Step() {
  if (thread_.stopping()) {
    lease_.Release(clock_.NowMillis());
    return false;
  }
  const absl::Time now = clock_.Now();
  if (!TakeLease(now)) return true;
  if (now - last_housekeeping_ >= options_.housekeeping_every) {
    last_housekeeping_ = now;
    Housekeeping();
  } else if (retention_behind_) {
    retention_behind_ = archiver_.Run().behind;
  }
  int handled = 0;
  if (absl::Status connected = ConnectLive(broker_); connected.ok()) {
    if (!connect_error_.empty()) {
      LogInfo("recovery_broker_reachable", {KV("after_failures", connect_failures_since_)});
      connect_error_.clear();
      connect_failures_since_ = 0;
    }
    const absl::Time round_start = clock_.Now();
    handled = Round();
    round_duration_.Observe(clock_.Now() - round_start);
  } else {
    ++consecutive_failures_;
    NoteConnectFailure(connected);
  }
  if (consecutive_failures_ >= options_.max_publish_failures) {
    lease_.Yield(consecutive_failures_, clock_.NowMillis());
    consecutive_failures_ = 0;
    thread_.Sleep(options_.lease_ttl);
    return true;
  }
  if (handled == 0) IdleWait(options_.idle_sleep);
  return true;
}

void RecoveryLoop::NoteConnectFailure(const absl::Status& why) {
  connect_failures_.Add();
  ++connect_failures_since_;
  // "waiting to reconnect" only says that the last attempt failed: the line
  // worth reading is that attempt's error. Logged when it changes, and once
  // a minute while it lasts.
  const std::string error(why.message());
  if (absl::StrContains(error, "waiting to reconnect") && !connect_error_.empty()) return;
  const absl::Time now = clock_.Now();
  if (error == connect_error_ && now - connect_error_logged_ < absl::Minutes(1)) return;
  connect_error_ = error;
  connect_error_logged_ = now;
  LogWarning("recovery_broker_unreachable",
             {KV("error", error), KV("failures", connect_failures_since_),
              KV("consecutive_failures", consecutive_failures_)});
}

bool RecoveryLoop::TakeLease(absl::Time now) {
  const LeaseKeeper::Turn turn = lease_.Keep(now);
  if (turn.held) return true;
  // Another instance holds it (a store failure says nothing of who does).
  if (turn.retry == absl::ZeroDuration()) StandDown();
  if (turn.standby > absl::ZeroDuration()) IdleWait(turn.standby);
  if (turn.retry > absl::ZeroDuration()) thread_.Sleep(turn.retry);
  return false;
}

int RecoveryLoop::Round() {
  const std::vector<std::string> queues = options_.watched_queues;
  auto queue = OnceMoreOnAFreshConnection(broker_, [&] { return InspectQueues(broker_, queues); });
  if (!queue.ok()) {
    ++consecutive_failures_;
    LogWarning("queue_inspect_failed",
               {KV("queue", options_.watched_name()), KV("error", queue.status().message())});
    return 0;
  }
  auto acks = outbox_.ReadAckProgress();
  if (!acks.ok()) LogWarning("ack_progress_failed", {KV("error", acks.status().message())});
  hold_.Update(*queue, acks.ok() ? *acks : AckProgress{}, [this] { return ProducerAway(); });
  CountAlerts();
  // What the round does is the hold's decision (NextHold); the lease may
  // have been lost meanwhile (a hold's deferral found it taken).
  const HoldRound next = hold_.round();
  if (next == HoldRound::kWait || !lease_.held()) return 0;
  if (next == HoldRound::kProbe) return Probe();
  const Republisher::Round round =
      republisher_.Run(0, next == HoldRound::kRepublishAway ? &away_retry_ : nullptr);
  CountAlerts();
  if (round.throttled > absl::ZeroDuration()) thread_.Sleep(round.throttled);
  if (round.publish == Republisher::Round::Publish::kConfirmed) consecutive_failures_ = 0;
  if (round.publish == Republisher::Round::Publish::kFailed) ++consecutive_failures_;
  return round.handled;
}

bool RecoveryLoop::ProducerAway() {
  if (options_.reply_queues.empty()) return false;
  auto replies = InspectQueues(broker_, options_.reply_queues);
  // Not known (the broker did not answer): the stall holds, as without
  // reply queues. A reply queue that does not exist (InspectQueues: no
  // consumer) has nobody listening on it: the producer is away.
  if (!replies.ok()) {
    LogWarning("queue_inspect_failed", {KV("queue", options_.reply_queues.front()),
                                        KV("error", replies.status().message())});
    return false;
  }
  return replies->consumers == 0;
}

int RecoveryLoop::Probe() {
  // One row per first retry delay: enough to learn whether copies are being
  // lost (its acknowledgement ends the stall), too few to pile up behind a
  // cut acknowledgement path.
  const absl::Time now = clock_.Now();
  if (now - last_probe_ < options_.retry.base_delay) return 0;
  last_probe_ = now;
  const Republisher::Round round = republisher_.Run(/*max_rows=*/1);
  CountAlerts();
  if (round.publish == Republisher::Round::Publish::kFailed) ++consecutive_failures_;
  return 0;  // idle until the next round either way
}

void RecoveryLoop::StandDown() {
  // The holder owns the incident and raises the same alerts (same names
  // and labels, no instance among them): a resolve from here would end
  // theirs. Ours are dropped and run out at their ends_at unrefreshed.
  const size_t dropped = hold_.StandDown() + alerts_.Forget();
  CountAlerts();
  if (dropped > 0) LogInfo("alerts_handed_over", {KV("alerts", static_cast<int64_t>(dropped))});
}

void RecoveryLoop::Housekeeping() {
  retention_behind_ = archiver_.Run().behind;
  for (const std::function<void()>& task : housekeeping_) task();
  alerts_.Refresh(outbox_, broker_);
  CountAlerts();
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

void RecoveryLoop::CountAlerts() {
  active_alerts_ = static_cast<int64_t>(alerts_.active() + hold_.active_alerts());
}

}  // namespace outbox
