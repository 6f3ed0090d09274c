#include "shared/outbox/internal/republish_hold.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "shared/observability/log.h"

namespace outbox {
namespace {
constexpr int kDeferBatch = 1000;  // rows pushed back per transaction
constexpr int kMaxDeferBatchesPerRound = 100;
}  // namespace

const char* DeliveryHoldName(DeliveryHold hold) {
  switch (hold) {
    case DeliveryHold::kConsumerDown: return "consumer_down";
    case DeliveryHold::kQueueBacklog: return "queue_backlog";
    case DeliveryHold::kAcksStalled: return "acks_stalled";
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

bool AcksStalled(const AckProgress& progress, int64_t now_ms, absl::Duration quiet) {
  // Never acknowledged (a new table, or every row archived): no flow to stall.
  if (progress.last_acked_at == 0) return false;
  const bool due = progress.first_due_at != 0 && progress.first_due_at <= now_ms;
  // The acknowledgements stopped around the oldest due row's last publish
  // (before it, or too soon after it to have answered its copy), and have
  // not come back: a stall. The copies a stopped consumer held unanswered
  // were published just before its last acknowledgement, and come due
  // first. A row held back (its due time moved, not its last publish) after
  // an acknowledgement, or whose copy was lost while acknowledgements went
  // on, is not stalled merely for coming due.
  const int64_t half = absl::ToInt64Milliseconds(quiet) / 2;
  return due && progress.last_acked_at < progress.first_due_published_at + half &&
         now_ms - progress.last_acked_at >= half;
}

absl::StatusOr<QueueState> InspectQueues(MessagePublisher& broker,
                                         const std::vector<std::string>& queues) {
  QueueState total;
  for (size_t i = 0; i < queues.size(); ++i) {
    auto state = broker.Inspect(queues[i]);
    // The producer declares the queue (recovery's broker user may not):
    // until it has, nobody consumes it.
    if (absl::IsNotFound(state.status())) return QueueState{0, 0};
    if (!state.ok()) return state;
    total.ready += state->ready;
    total.consumers = i == 0 ? state->consumers : std::min(total.consumers, state->consumers);
  }
  return total;
}

RepublishHold::RepublishHold(RecoveryRepository& outbox, LeaseKeeper& lease, AlertSink& alerts,
                             const Clock& clock, MetricsRegistry& metrics, RecoveryOptions options,
                             std::function<bool()> stopping)
    : outbox_(outbox),
      lease_(lease),
      clock_(clock),
      options_(std::move(options)),
      stopping_(std::move(stopping)),
      deferred_(metrics.AddCounter(
          "outbox_deferred_total",
          "due rows held back without spending an attempt (queue not consumed or far behind)")),
      alert_(alerts, clock, options_.alert_resend) {
  metrics.AddGauge(
      "outbox_delivery_held",
      "1 while re-publishing is held (nobody consumes the queue, it is far behind, or no "
      "acknowledgement arrives)",
      {}, [this] { return hold_.load() != 0 ? 1 : 0; });
  const Labels queue = {{"queue", options_.watched_name()}};
  metrics.AddGauge("outbox_queue_ready", "messages ready in the queue, as last seen", queue,
                   [this] { return static_cast<double>(queue_ready_.load()); });
  metrics.AddGauge("outbox_queue_consumers", "consumers of the queue, as last seen", queue,
                   [this] { return static_cast<double>(queue_consumers_.load()); });
}

HoldStep NextHold(const HoldState& state, const HoldObservation& seen,
                  const RecoveryOptions& options) {
  const DeliveryHold before = state.hold;
  const int64_t now_ms = absl::ToUnixMillis(seen.now);
  HoldStep step;
  HoldState& next = step.next;
  next = state;
  // The queue holds' hysteresis is theirs: a stall ending with copies queued
  // below the hold depth is no backlog.
  DeliveryHold hold = HoldFor(seen.queue, options.hold_queue_depth,
                              before == DeliveryHold::kAcksStalled ? DeliveryHold::kNone : before);
  // A queue hold that ends is no stall: its consumers are only now taking the
  // queued copies, so no acknowledgement can have come yet. It resumes (the
  // due rows one step back) and the stall is looked at once they come due.
  const bool queue_hold_ends =
      hold == DeliveryHold::kNone &&
      (before == DeliveryHold::kConsumerDown || before == DeliveryHold::kQueueBacklog);
  const bool stalled = hold == DeliveryHold::kNone && !queue_hold_ends &&
                       AcksStalled(seen.acks, now_ms, options.retry.base_delay);
  // The producer away from the broker: its fast path is cut too, so the due
  // rows never left it and no copy of them waits anywhere. Re-publishing
  // them is what gets them through; their acknowledgements wait in its
  // reply queue until it is back.
  bool away_now = next.producer_away;
  if (stalled && seen.producer_away) {
    away_now = seen.producer_away();
  } else if (next.producer_away && seen.acks.last_acked_at >= next.away_since_ms) {
    away_now = false;  // acknowledgements arrive again
  }
  if (away_now != next.producer_away) {
    step.producer = away_now ? HoldStep::Producer::kAway : HoldStep::Producer::kBack;
    next.producer_away = away_now;
    if (away_now) next.away_since_ms = now_ms;
  }
  // Each row once per absence: rows sent while it lasts wait the longest
  // delay, so after that long the first due may be one of them, its copy
  // confirmed and its acknowledgement waiting for the producer like the
  // others'. From then on the stall holds as any other. (Measured on this
  // instance's clock alone: the rows' time stamps may come from others'.)
  const bool away = stalled && next.producer_away;
  const bool long_absence =
      away && now_ms - next.away_since_ms >= absl::ToInt64Milliseconds(options.retry.max_delay);
  if (stalled && (!away || long_absence)) hold = DeliveryHold::kAcksStalled;
  next.hold = hold;
  if (hold == DeliveryHold::kNone) {
    step.resumed = before != DeliveryHold::kNone;
    // After a stall with the queue empty no copy is waiting there (they died
    // with a link): go on now.
    step.defer_due =
        step.resumed && !(before == DeliveryHold::kAcksStalled && seen.queue.ready == 0);
    step.round = next.producer_away ? HoldRound::kRepublishAway : HoldRound::kRepublish;
    return step;
  }
  step.held = before != hold;
  if (hold == DeliveryHold::kAcksStalled) {
    step.round = HoldRound::kProbe;
    return step;
  }
  // A backlog turning into a consumer outage (or back) is the same hold.
  if (before != DeliveryHold::kConsumerDown && before != DeliveryHold::kQueueBacklog) {
    next.queue_hold_since = seen.now;
  }
  step.queue_alert = true;
  // Not yet an incident before then: a consumer reconnecting after a broker restart.
  step.alert_due = seen.now - next.queue_hold_since >= options.hold_alert_after;
  step.round = HoldRound::kWait;
  return step;
}

DeliveryHold RepublishHold::Update(const QueueState& queue, const AckProgress& acks,
                                   const std::function<bool()>& producer_away) {
  queue_ready_ = queue.ready;
  queue_consumers_ = queue.consumers;
  const DeliveryHold before = state_.hold;
  const HoldStep step = NextHold(state_, {queue, acks, clock_.Now(), producer_away}, options_);
  if (step.producer != HoldStep::Producer::kSame) {
    LogInfo(step.producer == HoldStep::Producer::kAway ? "producer_away" : "producer_back",
            {KV("queue", options_.watched_name()), KV("last_acked_at", acks.last_acked_at)});
  }
  state_ = step.next;
  round_ = step.round;
  const DeliveryHold hold = step.next.hold;
  if (step.queue_alert) {
    Hold(step, queue);
    return hold;
  }
  if (step.resumed) Resume(before, queue, step.defer_due);
  if (step.held) {  // a stall
    LogWarning("delivery_held",
               {KV("reason", DeliveryHoldName(hold)), KV("queue", options_.watched_name()),
                KV("last_acked_at", acks.last_acked_at)});
  }
  hold_ = static_cast<int>(hold);
  alert_.Clear();
  return hold;
}

size_t RepublishHold::StandDown() {
  hold_ = 0;
  state_.hold = DeliveryHold::kNone;
  state_.producer_away = false;
  state_.away_since_ms = 0;
  return alert_.Forget();
}

void RepublishHold::Resume(DeliveryHold before, const QueueState& queue, bool defer_due) {
  // Consumers are back: the copies waiting in the queue are being delivered
  // now. Every due row gets one more backoff step before re-publishing, or
  // each would be sent a second time for nothing (OnHold leaves due the rows
  // whose last publish failed: no copy of them waits).
  const int64_t deferred = defer_due ? DeferAllDue() : 0;
  LogInfo("delivery_resumed",
          {KV("queue", options_.watched_name()), KV("was", DeliveryHoldName(before)),
           KV("ready", queue.ready), KV("consumers", queue.consumers), KV("deferred", deferred)});
}

int64_t RepublishHold::DeferAllDue() {
  int64_t total = 0;
  for (int i = 0; i < kMaxDeferBatchesPerRound && !stopping_(); ++i) {
    auto n =
        outbox_.DeferDue(clock_.NowMillis(), kDeferBatch, lease_.instance_id(), options_.retry);
    if (!n.ok()) {
      if (absl::IsFailedPrecondition(n.status())) {
        lease_.Lost();
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

void RepublishHold::Hold(const HoldStep& step, const QueueState& queue) {
  // Due rows are left as they are while held: nothing claims them, and
  // pushing each one a backoff step every few seconds would rewrite the whole
  // backlog over and over, under the write lock the producer's ack
  // listener needs to drain it. They get their step when the hold ends.
  const DeliveryHold hold = step.next.hold;
  auto waiting = outbox_.CountSendingOlderThan(std::numeric_limits<int64_t>::max());
  // A hold that keeps no row from its consumer (an idle producer's queue
  // without a consumer) is noted at info; it is a warning once rows wait.
  const bool rows_wait = !waiting.ok() || *waiting > 0;
  if (step.held) hold_warned_ = false;
  if (step.held || (rows_wait && !hold_warned_)) {
    Log(rows_wait ? LogLevel::kWarning : LogLevel::kInfo, "delivery_held",
        {KV("reason", DeliveryHoldName(hold)), KV("queue", options_.watched_name()),
         KV("ready", queue.ready), KV("consumers", queue.consumers),
         KV("rows_waiting", waiting.ok() ? *waiting : -1)});
    hold_warned_ = rows_wait;
  }
  hold_ = static_cast<int>(hold);
  if (!waiting.ok()) return;  // keep the alert as it is
  if (*waiting == 0) {        // nothing is kept from its consumer: nothing to alert on
    alert_.Clear();
    return;
  }
  if (!step.alert_due) return;
  alert_.Update({HeldAlert(hold, queue, *waiting)});
}

Alert RepublishHold::HeldAlert(DeliveryHold hold, const QueueState& queue, int64_t waiting) const {
  Alert alert;
  const bool down = hold == DeliveryHold::kConsumerDown;
  alert.name = down ? "OutboxConsumerDown" : "OutboxQueueBacklog";
  alert.severity = down ? "critical" : "warning";
  alert.labels = {{"queue", options_.watched_name()}};
  // A backlog is held from over the hold depth until a tenth of it (HoldFor):
  // said so, the summary is true at every depth the hold passes through,
  // and in the resolve that shows the last one.
  const std::string summary =
      down ? absl::StrCat("nobody consumes ", options_.watched_name(), ": ", waiting,
                          " outbox rows wait; re-publishing is held (no attempts spent)")
           : absl::StrCat(options_.watched_name(), " holds ", queue.ready,
                          " ready messages: re-publishing is held from over ",
                          options_.hold_queue_depth, " until it is down to ",
                          options_.hold_queue_depth / 10, " (no attempts spent); ", waiting,
                          " outbox rows wait");
  alert.annotations = {{"summary", summary},
                       {"depth", absl::StrCat(queue.ready)},
                       {"consumers", absl::StrCat(queue.consumers)},
                       {"rows_waiting", absl::StrCat(waiting)}};
  return alert;
}

}  // namespace outbox
