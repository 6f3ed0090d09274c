#include "shared/outbox/internal/dead_letters.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "shared/observability/log.h"

namespace outbox {

namespace {
// How often a call waiting for a dead-letter queue's lock asks again.
constexpr absl::Duration kLockPoll = absl::Milliseconds(10);
}  // namespace

class DeadLetters::Held {
 public:
  Held(DeadLetters& owner, std::string dlq) : owner_(owner), dlq_(std::move(dlq)) {}
  ~Held() ABSL_NO_THREAD_SAFETY_ANALYSIS { owner_.Release(dlq_); }  // within the call's lock
  Held(const Held&) = delete;
  Held& operator=(const Held&) = delete;

 private:
  DeadLetters& owner_;
  const std::string dlq_;
};

DeadLetters::DeadLetters(QueueBrowser& broker, std::vector<Source> sources,
                         absl::Duration lock_wait)
    : sources_(std::move(sources)), lock_wait_(lock_wait), broker_(&broker) {}

DeadLetters::~DeadLetters() {
  keeper_.Stop();
}

void DeadLetters::KeepAlive(absl::Duration heartbeat) {
  if (heartbeat <= absl::ZeroDuration()) return;
  // rabbitmq-c sends a heartbeat only while the connection is used, once one
  // is due; the broker closes a connection silent for two heartbeats. Polled
  // this often, it is never silent for much more than one.
  const absl::Duration every = std::min(heartbeat / 3, absl::Milliseconds(500));
  keeper_.Start([this, every] {
    if (!keeper_.Sleep(every)) return false;
    PollIdle();
    return true;
  });
}

void DeadLetters::PollIdle() {
  MutexLock lock(&mu_);
  if (!broker_->connected()) return;  // the next call connects
  absl::Status alive = broker_->Poll(absl::ZeroDuration());
  if (!alive.ok()) broker_->Reset(alive);  // logged and counted; the next call connects anew
}

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
  // This connection sits idle between calls, and the broker may have closed
  // it meanwhile (a restart; missed heartbeats without KeepAlive): a failure
  // on it earns one try on a fresh one.
  absl::Status last;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (absl::Status up = broker_->Connect(); !up.ok()) return up;
    absl::Status alive = broker_->Poll(absl::ZeroDuration());
    absl::StatusOr<bool> locked = alive.ok() ? AwaitLock(dlq) : absl::StatusOr<bool>(alive);
    if (locked.ok() && !*locked) {
      return absl::UnavailableError(
          absl::StrCat("dead-letter queue ", dlq, " is being read by another process; try again"));
    }
    if (!locked.ok() && !absl::IsUnavailable(locked.status())) {
      // Refused (the connection is fine), e.g. a broker user without the
      // permission to declare the lock's queue.
      return absl::Status(locked.status().code(),
                          absl::StrCat("dead-letter queue ", dlq, ": its lock ", LockQueueOf(dlq),
                                       ": ", locked.status().message()));
    }
    auto state = locked.ok() ? broker_->Inspect(dlq) : absl::StatusOr<QueueState>(locked.status());
    if (state.ok()) return Parked{dlq, state->ready};
    if (absl::IsNotFound(state.status())) {  // the connection is fine
      Release(dlq);
      return state.status();
    }
    last = state.status();
    broker_->Reset(last);  // the lock goes with the connection
  }
  return last;
}

absl::StatusOr<bool> DeadLetters::AwaitLock(const std::string& dlq) {
  const absl::Time deadline = absl::Now() + lock_wait_;
  for (;;) {
    absl::StatusOr<bool> locked = broker_->TryLock(dlq);
    if (!locked.ok() || *locked || absl::Now() >= deadline) return locked;
    absl::SleepFor(kLockPoll);
  }
}

void DeadLetters::Release(const std::string& dlq) {
  if (!broker_->connected()) return;  // reset on the way: the lock went with the connection
  if (absl::Status s = broker_->Unlock(dlq); !s.ok()) broker_->Reset(s);  // so it goes now
}

absl::StatusOr<DeadLetterPeek> DeadLetters::Peek(const std::string& queue, int limit) {
  MutexLock lock(&mu_);
  auto parked = OpenParked(queue);
  if (!parked.ok()) return parked.status();
  const std::string& dlq = parked->dlq;
  const Held held(*this, dlq);
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

absl::StatusOr<int64_t> DeadLetters::Count(const std::string& queue) {
  MutexLock lock(&mu_);
  auto parked = OpenParked(queue);
  if (!parked.ok()) return parked.status();
  const Held held(*this, parked->dlq);
  return parked->count;
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

DeadLettersRedriven DeadLetters::Redrive(const std::string& queue, int limit,
                                         const std::string& actor) {
  MutexLock lock(&mu_);
  DeadLettersRedriven result;
  auto parked = OpenParked(queue);
  if (!parked.ok()) {
    result.status = parked.status();
    return result;
  }
  const std::string& dlq = parked->dlq;
  const Held held(*this, dlq);
  // Only what is parked now: a message that fails again comes back to the
  // dead-letter queue and must not be re-driven in a loop.
  const int64_t budget = limit <= 0 ? parked->count : std::min<int64_t>(limit, parked->count);
  while (result.moved < budget) {
    auto d = broker_->Take(dlq);
    if (!d.ok()) {
      result.status = d.status();
      break;
    }
    if (d->delivery_tag == 0) break;
    // Publish first, ack the dead letter after the confirm: a crash in
    // between duplicates the message, which the consumers tolerate. It goes
    // back as it came, signature included: never re-signed here.
    auto confirmed =
        broker_->PublishConfirmed(Find(queue)->exchange, Forward(*d, queue), absl::Seconds(5));
    if (!confirmed.ok() || !*confirmed) {
      result.status = confirmed.ok() ? absl::UnavailableError("re-drive not confirmed by broker")
                                     : confirmed.status();
      break;
    }
    if (absl::Status s = broker_->Ack(d->delivery_tag); !s.ok()) {
      result.status = s;
      break;
    }
    ++result.moved;
  }
  if (!result.status.ok()) {
    broker_->Reset(result.status);  // unacked gets return to the queue with the connection
    LogWarning("dead_letters_redrive_stopped",
               {KV("queue", queue), KV("messages", result.moved), KV("actor", actor),
                KV("error", result.status.message())});
    return result;
  }
  LogInfo("dead_letters_redriven",
          {KV("queue", queue), KV("messages", result.moved), KV("actor", actor)});
  return result;
}

DeadLettersRemoved DeadLetters::RemoveSettled(const std::string& queue, int limit,
                                              const std::function<bool(const Delivery&)>& settled) {
  MutexLock lock(&mu_);
  DeadLettersRemoved result;
  auto parked = OpenParked(queue);
  if (!parked.ok()) {
    result.status = parked.status();
    return result;
  }
  const std::string& dlq = parked->dlq;
  const Held held(*this, dlq);
  const int64_t budget = std::min<int64_t>(limit, parked->count);
  uint64_t last_kept = 0;
  for (int64_t looked = 0; looked < budget; ++looked) {
    auto d = broker_->Take(dlq);
    if (!d.ok()) {
      result.status = d.status();
      break;
    }
    if (d->delivery_tag == 0) break;
    if (!settled(*d)) {
      last_kept = d->delivery_tag;
      continue;
    }
    if (absl::Status s = broker_->Ack(d->delivery_tag); !s.ok()) {
      result.status = s;
      break;
    }
    result.message_ids.push_back(d->message_id);
  }
  if (!result.status.ok()) {
    broker_->Reset(result.status);  // unacked gets return to the queue with the connection
    return result;
  }
  if (last_kept != 0) {
    if (absl::Status s = broker_->Requeue(last_kept, /*multiple=*/true); !s.ok()) {
      broker_->Reset(s);  // what was kept goes back with the connection all the same
      return result;
    }
    AwaitCount(dlq, parked->count - static_cast<int64_t>(result.message_ids.size()));
  }
  return result;
}

}  // namespace outbox
