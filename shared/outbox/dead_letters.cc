#include "shared/outbox/dead_letters.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "shared/observability/log.h"

namespace outbox {

DeadLetters::DeadLetters(QueueBrowser& broker, std::vector<Source> sources)
    : sources_(std::move(sources)), broker_(&broker) {}

void DeadLetters::RegisterMetrics(MetricsRegistry& metrics) {
  RegisterLinkMetrics(metrics, *broker_, "dead_letters");
}

const DeadLetters::Source* DeadLetters::Find(const std::string& queue) const {
  for (const Source& s : sources_) {
    if (s.queue == queue) return &s;
  }
  return nullptr;
}

absl::StatusOr<DeadLetters::Parked> DeadLetters::OpenParked(const std::string& queue) {
  if (Find(queue) == nullptr) {
    std::vector<std::string> names;
    for (const Source& s : sources_) names.push_back(s.queue);
    return absl::InvalidArgumentError(absl::StrCat(
        "queue must be one of '", absl::StrJoin(names, "', '"), "', not '", queue, "'"));
  }
  const std::string dlq = DeadLetterQueueOf(queue);
  // This connection sits idle between operator calls, and the broker may
  // have closed it meanwhile: a failure on it earns one try on a fresh one.
  absl::Status last;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (absl::Status up = broker_->Connect(); !up.ok()) return up;
    absl::Status alive = broker_->Poll(absl::ZeroDuration());
    auto state = alive.ok() ? broker_->Inspect(dlq) : absl::StatusOr<QueueState>(alive);
    if (state.ok()) return Parked{dlq, state->ready};
    if (absl::IsNotFound(state.status())) return state.status();  // the connection is fine
    last = state.status();
    broker_->Reset(last);
  }
  return last;
}

absl::StatusOr<DeadLetterPeek> DeadLetters::Peek(const std::string& queue, int limit) {
  MutexLock lock(&mu_);
  auto parked = OpenParked(queue);
  if (!parked.ok()) return parked.status();
  const std::string& dlq = parked->dlq;
  DeadLetterPeek peek;
  peek.total = parked->count;
  uint64_t last_tag = 0;
  while (static_cast<int>(peek.messages.size()) < limit) {
    auto d = broker_->Take(dlq);
    if (!d.ok()) {
      broker_->Reset(d.status());  // unacked gets return to the queue with the connection
      return d.status();
    }
    if (d->delivery_tag == 0) break;
    last_tag = d->delivery_tag;
    peek.messages.push_back(std::move(d).value());
  }
  if (last_tag != 0) {
    absl::Status s = broker_->Requeue(last_tag, /*multiple=*/true);
    if (!s.ok()) {
      broker_->Reset(s);
      return peek;
    }
    AwaitCount(dlq, peek.total);
  }
  return peek;
}

void DeadLetters::AwaitCount(const std::string& dlq, int64_t total) {
  // The requeue has no reply, and the count is read on another channel:
  // wait (briefly) until the broker counts the peeked messages again, so a
  // re-drive right after this call sees them.
  const absl::Time deadline = absl::Now() + absl::Seconds(2);
  for (;;) {
    auto state = broker_->Inspect(dlq);
    if (!state.ok() || state->ready >= total || absl::Now() > deadline) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
}

absl::StatusOr<int64_t> DeadLetters::Redrive(const std::string& queue, int limit,
                                             const std::string& actor) {
  MutexLock lock(&mu_);
  auto parked = OpenParked(queue);
  if (!parked.ok()) return parked.status();
  const std::string& dlq = parked->dlq;
  // Only what is parked now: a message that fails again comes back to the
  // dead-letter queue and must not be re-driven in a loop.
  const int64_t budget = limit <= 0 ? parked->count : std::min<int64_t>(limit, parked->count);
  int64_t moved = 0;
  while (moved < budget) {
    auto d = broker_->Take(dlq);
    if (!d.ok()) {
      broker_->Reset(d.status());
      return d.status();
    }
    if (d->delivery_tag == 0) break;
    // Publish first, ack the dead letter after the confirm: a crash in
    // between duplicates the message, which the consumers tolerate. It goes
    // back as it came, signature included: never re-signed here.
    auto confirmed =
        broker_->PublishConfirmed(Find(queue)->exchange, Forward(*d, queue), absl::Seconds(5));
    if (!confirmed.ok() || !*confirmed) {
      absl::Status why = confirmed.ok() ? absl::UnavailableError("re-drive not confirmed by broker")
                                        : confirmed.status();
      broker_->Reset(why);
      return why;
    }
    absl::Status s = broker_->Ack(d->delivery_tag);
    if (!s.ok()) {
      broker_->Reset(s);
      return s;
    }
    ++moved;
  }
  LogInfo("dead_letters_redriven", {KV("queue", queue), KV("messages", moved), KV("actor", actor)});
  return moved;
}

absl::StatusOr<std::vector<std::string>> DeadLetters::RemoveSettled(
    const std::string& queue, int limit, const std::function<bool(const Delivery&)>& settled) {
  MutexLock lock(&mu_);
  auto parked = OpenParked(queue);
  if (!parked.ok()) return parked.status();
  const std::string& dlq = parked->dlq;
  const int64_t budget = std::min<int64_t>(limit, parked->count);
  std::vector<std::string> removed;
  uint64_t last_kept = 0;
  for (int64_t looked = 0; looked < budget; ++looked) {
    auto d = broker_->Take(dlq);
    if (!d.ok()) {
      broker_->Reset(d.status());  // unacked gets return to the queue with the connection
      return d.status();
    }
    if (d->delivery_tag == 0) break;
    if (!settled(*d)) {
      last_kept = d->delivery_tag;
      continue;
    }
    absl::Status s = broker_->Ack(d->delivery_tag);
    if (!s.ok()) {
      broker_->Reset(s);
      return s;
    }
    removed.push_back(d->message_id);
  }
  if (last_kept != 0) {
    absl::Status s = broker_->Requeue(last_kept, /*multiple=*/true);
    if (!s.ok()) {
      broker_->Reset(s);
      return removed;
    }
    AwaitCount(dlq, parked->count - static_cast<int64_t>(removed.size()));
  }
  return removed;
}

}  // namespace outbox
