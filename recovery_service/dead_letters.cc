#include "recovery_service/dead_letters.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "shared/observability/log.h"
#include "shared/outbox/transport.h"

namespace outbox::recovery {

DeadLetters::DeadLetters(const AmqpUrl& url, std::vector<Source> sources)
    : sources_(std::move(sources)),
      // Declares nothing: recovery's broker user may not.
      dialer_(url, Topology{}, "recovery-dead-letters",
               [](AmqpConnection& c) { return c.EnableConfirms(); }) {}

void DeadLetters::RegisterMetrics(MetricsRegistry& metrics) {
  const AmqpDialer& dialer = dialer_;
  RegisterConnectionMetrics(
      metrics, "dead_letters", [&dialer] { return dialer.up(); },
      [&dialer] { return dialer.drops(); });
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
  const std::string dlq = Topology::DeadLetterQueue(queue);
  // This connection sits idle between operator calls, and the broker may
  // have closed it meanwhile: a failure on it earns one try on a fresh one.
  absl::Status last;
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto conn = dialer_.Get();
    if (!conn.ok()) return conn.status();
    absl::Status alive = (*conn)->Poll(absl::ZeroDuration());
    auto count = alive.ok() ? (*conn)->MessageCount(dlq) : absl::StatusOr<uint32_t>(alive);
    if (count.ok()) return Parked{*conn, dlq, *count};
    if (absl::IsNotFound(count.status())) return count.status();  // the connection is fine
    last = count.status();
    dialer_.Reset(last);
  }
  return last;
}

absl::StatusOr<DeadLetterPeek> DeadLetters::Peek(const std::string& queue, int limit) {
  MutexLock lock(&mu_);
  auto parked = OpenParked(queue);
  if (!parked.ok()) return parked.status();
  AmqpConnection* const conn = parked->conn;
  const std::string& dlq = parked->dlq;
  DeadLetterPeek peek;
  peek.total = parked->count;
  uint64_t last_tag = 0;
  while (static_cast<int>(peek.messages.size()) < limit) {
    auto d = conn->Get(dlq);
    if (!d.ok()) {
      dialer_.Reset(d.status());  // unacked gets return to the queue with the connection
      return d.status();
    }
    if (d->delivery_tag == 0) break;
    last_tag = d->delivery_tag;
    peek.messages.push_back(std::move(d).value());
  }
  if (last_tag != 0) {
    absl::Status s = conn->Requeue(last_tag, /*multiple=*/true);
    if (!s.ok()) {
      dialer_.Reset(s);
      return peek;
    }
    // The requeue has no reply, and the count is read on another channel:
    // wait (briefly) until the broker counts the peeked messages again, so
    // a re-drive right after this call sees them.
    const absl::Time deadline = absl::Now() + absl::Seconds(2);
    for (;;) {
      auto count = conn->MessageCount(dlq);
      if (!count.ok() || static_cast<int64_t>(*count) >= peek.total || absl::Now() > deadline) break;
      absl::SleepFor(absl::Milliseconds(5));
    }
  }
  return peek;
}

absl::StatusOr<int64_t> DeadLetters::Redrive(const std::string& queue, int limit) {
  MutexLock lock(&mu_);
  auto parked = OpenParked(queue);
  if (!parked.ok()) return parked.status();
  AmqpConnection* const conn = parked->conn;
  const std::string& dlq = parked->dlq;
  // Only what is parked now: a message that fails again comes back to the
  // dead-letter queue and must not be re-driven in a loop.
  const int64_t budget = limit <= 0 ? parked->count : std::min<int64_t>(limit, parked->count);
  int64_t moved = 0;
  while (moved < budget) {
    auto d = conn->Get(dlq);
    if (!d.ok()) {
      dialer_.Reset(d.status());
      return d.status();
    }
    if (d->delivery_tag == 0) break;
    // Publish first, ack the dead letter after the confirm: a crash in
    // between duplicates the message, which the consumers tolerate. It goes
    // back as it came, signature included: never re-signed here.
    conn->PublishThrough(Find(queue)->exchange);
    auto confirmed = conn->PublishConfirmed({Forward(*d, queue)}, absl::Seconds(5));
    if (!confirmed.ok() || !(*confirmed)[0]) {
      absl::Status why = confirmed.ok() ? absl::UnavailableError("re-drive not confirmed by broker")
                                        : confirmed.status();
      dialer_.Reset(why);
      return why;
    }
    absl::Status s = conn->Ack(d->delivery_tag, false);
    if (!s.ok()) {
      dialer_.Reset(s);
      return s;
    }
    ++moved;
  }
  LogInfo("dead_letters_redriven", {KV("queue", queue), KV("messages", moved)});
  return moved;
}

}  // namespace outbox::recovery
