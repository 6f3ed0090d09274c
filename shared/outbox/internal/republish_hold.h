#pragma once

// Whether re-publishing waits: while nobody consumes the queue re-publishes
// go to, or it is far behind, another copy would only wait there too. Held,
// due rows are neither claimed nor rewritten (no attempts spent) and one
// alert stands for the incident; when the hold ends every due row gets one
// more backoff step, since the copies still queued are being delivered now
// (not a row whose last publish failed: no copy of it is queued; OnHold).
//
// The same goes while no acknowledgement arrives at all (acks_stalled): rows
// falling due then are not lost copies but a cut acknowledgement path
// (the consumer or the producer cut off from the broker, the producer's
// ack listener gone),
// and a copy of each would only queue up behind the first. Then the loop
// re-publishes one probe row per first retry delay: if copies were lost after
// all, the probe's acknowledgement ends the stall. No alert of its own: the
// causes have theirs (OutboxConsumerDown, OutboxBacklog, OutboxServiceDown).
// Unless the producer is away (RecoveryOptions::reply_queues): its fast path
// is cut with its listener, the due rows never left it, and re-publishing
// them is what gets them through while it is gone. Once each: a row sent
// while the producer is away has its copy confirmed and its acknowledgement
// waiting in the reply queue, so the recovery loop gives it the longest
// delay (RetryPolicy::max_delay) before its next attempt, and once the
// absence has lasted that long the stall holds as any other.
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shared/base/clock.h"
#include "shared/observability/internal/alert_group.h"
#include "shared/observability/internal/alerts.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/internal/lease_keeper.h"
#include "shared/outbox/internal/recovery_options.h"
#include "shared/outbox/repository.h"
#include "shared/outbox/transport.h"

namespace outbox {

// Why re-publishing is held (none: it goes on).
enum class DeliveryHold { kNone = 0, kConsumerDown = 1, kQueueBacklog = 2, kAcksStalled = 3 };
// "", "consumer_down", "queue_backlog", "acks_stalled"
const char* DeliveryHoldName(DeliveryHold hold);

// The decision, as a plain function: nobody consumes the queue, or it holds
// more than `max_ready` messages, so another copy would only wait there too.
// A hold in force (`current`) lasts until the queue is down to max_ready / 10:
// the copies still queued when consumers return are being delivered, and a
// row coming due meanwhile would only be sent a second time.
DeliveryHold HoldFor(const QueueState& queue, int64_t max_ready,
                     DeliveryHold current = DeliveryHold::kNone);

// Rows are due (the earliest next retry has passed), acknowledgements had
// flowed, the last one came less than half of `quiet` (a first retry delay)
// after the oldest due row was last published, and none has come for half
// of `quiet` since: none of the copies out there is getting through, so more
// of the same would not either. So a consumer that stops (frozen, cut off)
// holds from the first round on, when the rows it held unacknowledged come
// due; a row whose copy was lost while acknowledgements went on for longer
// than that after its publish is sent again.
bool AcksStalled(const AckProgress& progress, int64_t now_ms, absl::Duration quiet);

// The queues of a group seen as one: their ready messages add up, and the
// fewest consumers of any counts, since which queue a message hashes to is
// the broker's call. A queue not declared yet has nobody consuming it.
absl::StatusOr<QueueState> InspectQueues(MessagePublisher& broker,
                                         const std::vector<std::string>& queues);

// --- The hold policy as one transition: how the last round left the hold,
// and what this round sees, give the hold now and what the round does.
//
//   before       seen this round                          after          the round
//   any          nobody consumes the queue                consumer_down  waits; queue alert
//   none, stall  over hold_queue_depth ready              queue_backlog  waits; queue alert
//   queue hold   consumed, over a tenth of that ready     queue_backlog  waits; queue alert
//   queue hold   consumed, at most a tenth ready          none           re-publishes
//   none, stall  acks stalled, producer listening         acks_stalled   probes
//   none, stall  acks stalled, producer away < max_delay  none           re-publishes as away
//   none, stall  acks stalled, away >= max_delay          acks_stalled   probes
//   stall        acks flow                                none           re-publishes
//   none         acks flow, producer away                 none           re-publishes as away
//   none         an ack since it went away                none           re-publishes: it is back
//
// "queue hold": consumer_down or queue_backlog (one hold that may change its
// reason; a tenth: hold_queue_depth / 10); "stall": acks_stalled (AcksStalled).
// A hold that begins or changes its reason logs delivery_held (a queue hold
// that keeps no row waiting at info, and at warning once rows wait). One that ends
// logs delivery_resumed, after every due row got one more backoff step
// (defer_due), unless a stall ends with nothing ready in the queue. A stall
// is not looked at in the round a queue hold ends (its consumers have only
// begun on the queued copies); the producer is asked about (a look at its
// reply queues) only while acknowledgements are stalled, and is back once an
// acknowledgement newer than its absence arrives. A queue hold's alert is
// raised once the hold has lasted hold_alert_after with rows waiting; every
// other round clears it.
struct HoldState {
  DeliveryHold hold = DeliveryHold::kNone;
  bool producer_away = false;  // the last stall seen found the producer away
  int64_t away_since_ms = 0;   // unix ms: when it was first found away
  absl::Time queue_hold_since = absl::InfinitePast();  // when the current queue hold began
};

struct HoldObservation {
  QueueState queue;  // the watched queues (InspectQueues)
  AckProgress acks;
  absl::Time now;
  // Whether the producer is away (its reply queues have no consumer); asked
  // only while acknowledgements are stalled. Empty: never away.
  std::function<bool()> producer_away;
};

// What the round does once the hold is decided.
enum class HoldRound {
  kWait,           // a queue hold: nothing is claimed
  kProbe,          // acknowledgements stalled: one probe row per first retry delay
  kRepublish,      // due rows are re-published
  kRepublishAway,  // ... with the longest delay before the next (the producer is away)
};

struct HoldStep {
  HoldState next;
  enum class Producer { kSame, kAway, kBack } producer = Producer::kSame;  // logged when it changes
  bool held = false;         // a hold began or changed reason: delivery_held is logged
  bool resumed = false;      // the hold ended: delivery_resumed is logged
  bool defer_due = false;    // ... after every due row got one more backoff step
  bool queue_alert = false;  // the queue hold's alert stands (updated, or cleared if no row waits)
  bool alert_due = false;    // ... and the hold has lasted hold_alert_after: it is raised
  HoldRound round = HoldRound::kWait;
};

// Pure but for `seen.producer_away`, which it calls at most once.
HoldStep NextHold(const HoldState& state, const HoldObservation& seen,
                  const RecoveryOptions& options);

class RepublishHold {
 public:
  // `stopping` cuts the deferral of a long backlog short.
  RepublishHold(
      RecoveryRepository& outbox, LeaseKeeper& lease, AlertSink& alerts, const Clock& clock,
      MetricsRegistry& metrics, RecoveryOptions options,
      std::function<bool()> stopping = [] { return false; });

  // Sets the hold from what the queue and the acknowledgements look like now
  // (NextHold), carries out the step's actions (logs, deferral) and keeps its
  // alert (OutboxConsumerDown / OutboxQueueBacklog) in step; returns it.
  // `producer_away`, asked only while acknowledgements are stalled, says
  // whether the producer has no connection to hear them on: then the stall
  // does not hold.
  DeliveryHold Update(const QueueState& queue, const AckProgress& acks = {},
                      const std::function<bool()>& producer_away = {});

  // Another instance holds the lease now, and with it the incident: the
  // hold is theirs to decide and their alert stands for it (same name and
  // labels), so ours is dropped without a resolve (AlertGroup::Forget).
  // Returns how many alerts were dropped.
  size_t StandDown();

  // Readable from any thread (the ops API).
  DeliveryHold current() const { return static_cast<DeliveryHold>(hold_.load()); }
  // Whether the last stall seen found the producer away (the loop thread's).
  bool producer_away() const { return state_.producer_away; }
  // What the round does, as the last Update decided (the loop thread's).
  HoldRound round() const { return round_; }
  QueueState last_queue() const { return {queue_ready_.load(), queue_consumers_.load()}; }
  int64_t deferred() const { return deferred_.value(); }
  size_t active_alerts() const { return alert_.active(); }

 private:
  // The hold ends: every due row one more backoff step when `defer_due`.
  void Resume(DeliveryHold before, const QueueState& queue, bool defer_due);
  // Pushes every due row one backoff step; returns how many.
  int64_t DeferAllDue();
  // A queue hold: logged when new (a warning when rows wait, info when none
  // do) and again as a warning once rows wait; its alert says how many rows
  // wait, or is cleared when none do.
  void Hold(const HoldStep& step, const QueueState& queue);
  Alert HeldAlert(DeliveryHold hold, const QueueState& queue, int64_t waiting) const;

  RecoveryRepository& outbox_;
  LeaseKeeper& lease_;
  const Clock& clock_;
  const RecoveryOptions options_;
  const std::function<bool()> stopping_;
  Counter& deferred_;
  AlertGroup alert_;
  HoldState state_;                     // the loop thread's
  HoldRound round_ = HoldRound::kWait;  // the last Update's
  bool hold_warned_ = false;            // the queue hold's delivery_held was a warning
  std::atomic<int> hold_{0};            // state_.hold, for the ops API
  std::atomic<int64_t> queue_ready_{0};
  std::atomic<int> queue_consumers_{0};
};

}  // namespace outbox
