#include "shared/outbox/internal/relay.h"

#include <algorithm>
#include <set>
#include <utility>

#include "shared/observability/log.h"
#include "shared/runtime/internal/failpoint.h"

namespace outbox {

Relay::Relay(MessagePublisher& broker, OutboxRepository& outbox, const Clock& clock,
             MetricsRegistry& metrics, RelayOptions options)
    : broker_(broker),
      outbox_(outbox),
      clock_(clock),
      options_(options),
      confirmed_(metrics.AddCounter("outbox_fast_publish_total", "fast-path publishes by result",
                                    {{"result", "confirmed"}})),
      failed_total_(metrics.AddCounter("outbox_fast_publish_total", "", {{"result", "failed"}})),
      dropped_(metrics.AddCounter("outbox_fast_publish_total", "", {{"result", "dropped"}})),
      handed_over_(
          metrics.AddCounter("outbox_fast_publish_total", "", {{"result", "left_to_recovery"}})),
      note_failures_(StoreWriteFailures(metrics, "record_publish_failure")),
      confirm_latency_(metrics.AddDurationHistogram(
          "outbox_fast_publish_confirm_seconds",
          "from a fast-path publish to the broker's positive confirm")) {
  RegisterLinkMetrics(metrics, broker_, "publisher");
}

Relay::~Relay() {
  Stop();
}

void Relay::Start() {
  thread_.Start([this] { return Step(); });
}

void Relay::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.Stop();
}

void Relay::Enqueue(std::vector<OutgoingMessage> messages, absl::Time written_at) {
  const absl::Time now = std::min(clock_.Now(), written_at);
  MutexLock lock(&mu_);
  for (OutgoingMessage& m : messages) {
    if (queue_.size() >= options_.capacity) {
      dropped_.Add();  // the row stays SENDING; recovery re-publishes it
      continue;
    }
    queue_.push_back({std::move(m), now});
  }
}

void Relay::FailInFlight(const absl::Status& why) {
  std::vector<Queued> back = in_flight_.TakeAll();  // in publishing order
  for (const Queued& q : back) failed_.push_back(q.message.message_id);
  Requeue(std::move(back));
  error_ = std::string(why.message());
  broker_.Reset(why);
}

void Relay::Requeue(std::vector<Queued> items) {
  MutexLock lock(&mu_);
  if (stopping_) return;  // the rows stay SENDING: recovery's, as at any stop
  queue_.insert(queue_.begin(), std::make_move_iterator(items.begin()),
                std::make_move_iterator(items.end()));
}

void Relay::ReportFailures() {
  if (failed_.empty()) return;
  failed_total_.Add(static_cast<int64_t>(failed_.size()));
  LogWarning("fast_publish_failed", {KV("messages", failed_.size()),
                                     KV("first_message_id", failed_.front()), KV("error", error_)});
  // The row stays SENDING either way: a lost connection's messages are
  // published again by the relay (FailInFlight), nacked or returned ones by
  // recovery. Only last_error (shown to operators) would miss this failure.
  absl::Status s = outbox_.RecordPublishFailure(failed_, error_);
  if (!s.ok()) {
    note_failures_.Add();
    LogWarning("record_publish_failure_failed",
               {KV("messages", failed_.size()), KV("first_message_id", failed_.front()),
                KV("error", s.message())});
  }
  failed_.clear();
}

bool Relay::Step() {
  bool stopping = false;
  if (!AwaitWork(&stopping)) return false;
  if (absl::Status up = broker_.Connect(); !up.ok()) return BrokerAway(up, stopping);
  const size_t taken = FillWindow();
  if (in_flight_.empty()) {
    ReportFailures();
    if (taken == 0) {
      absl::Status s = broker_.Poll(absl::Milliseconds(1));
      if (!s.ok()) broker_.Reset(s);
    }
    return true;
  }
  SettleConfirms();
  ReportFailures();
  return true;
}

bool Relay::AwaitWork(bool* stopping) {
  MutexLock lock(&mu_);
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stopping_; };
  // With nothing in flight, sleep until there is work; wake at least every
  // second to keep the idle connection's heartbeats going.
  if (in_flight_.empty()) mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(1));
  *stopping = stopping_;
  return !(stopping_ && queue_.empty() && in_flight_.empty());
}

bool Relay::BrokerAway(const absl::Status& why, bool stopping) {
  if (!in_flight_.empty()) FailInFlight(why);
  ReportFailures();
  if (stopping) return false;  // whatever is queued stays SENDING for recovery
  MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(100));
  return true;
}

size_t Relay::FillWindow() {
  std::vector<Queued> batch;
  bool late = false;  // some waited past their first retry: recovery may have them
  const absl::Time now = clock_.Now();
  {
    MutexLock lock(&mu_);
    while (!queue_.empty() && in_flight_.size() + batch.size() < options_.window) {
      late = late || now - queue_.front().since >= options_.hand_over_after;
      batch.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
  }
  const size_t taken = batch.size();
  if (late) LeaveTakenOver(batch);
  for (size_t i = 0; i < batch.size(); ++i) {
    auto tag = broker_.Publish(batch[i].message);
    if (!tag.ok()) {
      // The unsent rest goes back first, then what was in flight before it.
      std::vector<Queued> unsent;
      for (size_t k = i; k < batch.size(); ++k) {
        failed_.push_back(batch[k].message.message_id);
        unsent.push_back(std::move(batch[k]));
      }
      Requeue(std::move(unsent));
      FailInFlight(tag.status());
      break;
    }
    in_flight_.Add(*tag, std::move(batch[i]), now);
  }
  return taken;
}

void Relay::LeaveTakenOver(std::vector<Queued>& batch) {
  std::vector<std::string> ids;
  for (const Queued& q : batch) ids.push_back(q.message.message_id);
  auto taken = outbox_.TakenOver(ids);
  if (!taken.ok()) {  // publish them all: a copy too many at worst
    LogWarning("taken_over_read_failed", {KV("error", taken.status().message())});
    return;
  }
  if (taken->empty()) return;
  const std::set<std::string> skip(taken->begin(), taken->end());
  batch.erase(std::remove_if(batch.begin(), batch.end(),
                             [&](const Queued& q) { return skip.count(q.message.message_id) > 0; }),
              batch.end());
  handed_over_.Add(static_cast<int64_t>(skip.size()));
  LogInfo("fast_publish_left_to_recovery",
          {KV("messages", skip.size()), KV("first_message_id", *skip.begin())});
}

void Relay::SettleConfirms() {
  // Wait briefly only when there is nothing new to send.
  bool more_waiting;
  {
    MutexLock lock(&mu_);
    more_waiting = !queue_.empty() && in_flight_.size() < options_.window;
  }
  std::vector<Confirm> settled;
  absl::Status s =
      broker_.ReadConfirms(more_waiting ? absl::ZeroDuration() : absl::Milliseconds(20), &settled);
  int64_t confirmed = 0;
  const absl::Time confirmed_at = clock_.Now();
  for (auto& [queued, c, sent] : in_flight_.Settle(settled)) {
    if (c.ok) {
      ++confirmed;
      confirm_latency_.Observe(confirmed_at - sent);
    } else {
      // The broker has it and said no: recovery's to send again.
      failed_.push_back(std::move(queued.message.message_id));
      error_ = c.unroutable ? "publish returned by broker: no queue for the routing key"
                            : "publish not confirmed by broker (nack)";
    }
  }
  confirmed_.Add(confirmed);
  // Published and confirmed; the callers' replies race with this point.
  if (confirmed > 0 && !options_.after_publish_failpoint.empty()) {
    Failpoint(options_.after_publish_failpoint);
  }
  if (!s.ok()) {
    FailInFlight(s);
  } else if (in_flight_.Overdue(clock_.Now(), options_.confirm_timeout)) {
    // A confirm this late means the connection is stuck: start over.
    FailInFlight(absl::DeadlineExceededError("publish confirm timed out"));
  }
}

}  // namespace outbox
