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
#include "shared/observability/alert_group.h"
#include "shared/observability/alerts.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/lease_keeper.h"
#include "shared/outbox/recovery_options.h"
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

// The queues of a group seen as one: their ready messages add up, and the
// fewest consumers of any counts, since which queue a message hashes to is
// the broker's call. A queue not declared yet has nobody consuming it.
// Rows are due (the earliest next retry has passed), acknowledgements had
// flowed, the last one came less than half of `quiet` (a first retry delay)
// after the oldest due row was last published, and none has come for half
// of `quiet` since: none of the copies out there is getting through, so more
// of the same would not either. So a consumer that stops (frozen, cut off)
// holds from the first round on, when the rows it held unacknowledged come
// due; a row whose copy was lost while acknowledgements went on for longer
// than that after its publish is sent again.
bool AcksStalled(const AckProgress& progress, int64_t now_ms, absl::Duration quiet);

absl::StatusOr<QueueState> InspectQueues(MessagePublisher& broker,
                                         const std::vector<std::string>& queues);

class RepublishHold {
 public:
  // `stopping` cuts the deferral of a long backlog short.
  RepublishHold(
      RecoveryRepository& outbox, LeaseKeeper& lease, AlertSink& alerts, const Clock& clock,
      MetricsRegistry& metrics, RecoveryOptions options,
      std::function<bool()> stopping = [] { return false; });

  // Sets the hold from what the queue and the acknowledgements look like now
  // and keeps its alert (OutboxConsumerDown / OutboxQueueBacklog) in step;
  // returns it. `producer_away`, asked only while acknowledgements are
  // stalled, says whether the producer has no connection to hear them on:
  // then the stall does not hold.
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
  bool producer_away() const { return producer_away_; }
  QueueState last_queue() const { return {queue_ready_.load(), queue_consumers_.load()}; }
  int64_t deferred() const { return deferred_.value(); }
  size_t active_alerts() const { return alert_.active(); }

 private:
  // The producer found away or back: logged once per change.
  void NoteProducer(bool away, const AckProgress& acks);
  // The hold ends: every due row one more backoff step.
  void Resume(DeliveryHold before, const QueueState& queue);
  // Pushes every due row one backoff step; returns how many.
  int64_t DeferAllDue();
  // Held: the alert says how many rows wait, or is cleared when none do.
  void Hold(DeliveryHold hold, DeliveryHold before, const QueueState& queue);
  Alert HeldAlert(DeliveryHold hold, const QueueState& queue, int64_t waiting) const;

  RecoveryRepository& outbox_;
  LeaseKeeper& lease_;
  const Clock& clock_;
  const RecoveryOptions options_;
  const std::function<bool()> stopping_;
  Counter& deferred_;
  AlertGroup alert_;
  std::atomic<int> hold_{0};
  bool producer_away_ = false;  // the last stall seen found the producer away
  absl::Time queue_hold_since_ = absl::InfinitePast();  // when the current queue hold began
  int64_t away_since_ = 0;                              // unix ms: when it was first found away
  std::atomic<int64_t> queue_ready_{0};
  std::atomic<int> queue_consumers_{0};
};

}  // namespace outbox
