#include "shared/testing/fakes.h"

#include <algorithm>
#include <iterator>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "shared/outbox/internal/failure.h"
#include "shared/outbox/internal/state_machine.h"

namespace outbox::testing {

absl::Status FakeLink::DoConnect() {
  if (connected_) return absl::OkStatus();
  if (!reachable) return absl::UnavailableError("fake broker unreachable");
  connected_ = true;
  broken_ = false;  // a new connection
  ++connects;
  return absl::OkStatus();
}

absl::Status FakeLink::Check() {
  if (broken_) {
    if (connected_) ++drops_;
    connected_ = broken_ = false;
  }
  return connected_ ? absl::OkStatus() : absl::UnavailableError("fake connection lost");
}

void FakeLink::DoReset(const absl::Status& why) {
  if (connected_) ++drops_;
  connected_ = false;
  resets.emplace_back(why.message());
}

void FakePublisher::Reset(const absl::Status& why) {
  DoReset(why);
  pending_.clear();  // a new connection starts a new tag sequence
  silent_.clear();
  next_tag_ = 1;
}

absl::StatusOr<uint64_t> FakePublisher::Publish(const OutgoingMessage& message) {
  if (absl::Status s = Check(); !s.ok()) return s;
  const uint64_t tag = next_tag_++;
  switch (answer(message)) {
    case Answer::kAck:
      published.push_back(message);
      pending_.push_back({tag, true, false});
      break;
    case Answer::kNack: pending_.push_back({tag, false, false}); break;
    case Answer::kReturn: pending_.push_back({tag, false, true}); break;
    case Answer::kSilent: silent_.insert(tag); break;
  }
  return tag;
}

absl::Status FakePublisher::ReadConfirms(absl::Duration wait, std::vector<Confirm>* settled) {
  if (absl::Status s = Check(); !s.ok()) return s;
  if (pending_.empty() || hold_confirms) {
    if (clock != nullptr) clock->Advance(wait);
    return absl::OkStatus();
  }
  settled->insert(settled->end(), pending_.begin(), pending_.end());
  pending_.clear();
  return absl::OkStatus();
}

absl::StatusOr<QueueState> FakePublisher::Inspect(const std::string& queue) {
  if (absl::Status s = Check(); !s.ok()) return s;
  ++inspections;
  if (missing.count(queue)) return absl::NotFoundError("fake broker: no queue '" + queue + "'");
  auto it = queues.find(queue);
  return it == queues.end() ? QueueState{0, 1} : it->second;
}

Delivery DeliveryOf(const OutgoingMessage& m) {
  Delivery d;
  d.message_id = m.message_id;
  d.reply_to = m.reply_to;
  d.type = m.type;
  d.traceparent = m.traceparent;
  d.signature = m.signature;
  d.shard_key = m.shard_key;
  d.body = m.body;
  return d;
}

void FakeConsumer::Reset(const absl::Status& why) {
  DoReset(why);
  // Unacked deliveries return to their places, redelivered, with new tags.
  for (auto& [tag, held] : unacked_) GiveBack(std::move(held));
  unacked_.clear();
  for (Held& held : ready_) held.d.delivery_tag = next_tag_++;
}

void FakeConsumer::GiveBack(Held held) {
  held.d.redelivered = true;
  auto at = std::upper_bound(ready_.begin(), ready_.end(), held.place,
                             [](uint64_t place, const Held& h) { return place < h.place; });
  ready_.insert(at, std::move(held));
}

uint64_t FakeConsumer::Push(Delivery d) {
  d.delivery_tag = next_tag_++;
  ready_.push_back({next_place_++, d});
  return d.delivery_tag;
}

absl::StatusOr<std::vector<Delivery>> FakeConsumer::Next(size_t max, absl::Duration) {
  ++nexts;
  if (on_next) on_next(nexts);
  if (absl::Status s = Check(); !s.ok()) return s;
  std::vector<Delivery> out;
  while (!ready_.empty() && out.size() < max) {
    out.push_back(ready_.front().d);
    unacked_[ready_.front().d.delivery_tag] = std::move(ready_.front());
    ready_.pop_front();
  }
  return out;
}

void FakeConsumer::Settle(uint64_t tag, bool multiple, std::set<uint64_t>& into) {
  for (auto it = unacked_.begin(); it != unacked_.end();) {
    if (it->first == tag || (multiple && it->first < tag)) {
      into.insert(it->first);
      it = unacked_.erase(it);
    } else {
      ++it;
    }
  }
}

absl::Status FakeConsumer::Ack(uint64_t tag, bool multiple) {
  if (absl::Status s = Check(); !s.ok()) return s;
  Settle(tag, multiple, acked);
  return absl::OkStatus();
}

absl::Status FakeConsumer::Reject(uint64_t tag) {
  if (absl::Status s = Check(); !s.ok()) return s;
  if (auto it = unacked_.find(tag); it != unacked_.end()) dead_lettered.push_back(it->second.d);
  Settle(tag, false, rejected);
  return absl::OkStatus();
}

absl::Status FakeConsumer::Requeue(uint64_t tag, bool multiple) {
  if (absl::Status s = Check(); !s.ok()) return s;
  std::set<uint64_t> tags;
  std::vector<Held> back;
  for (auto& [t, held] : unacked_) {
    if (t == tag || (multiple && t < tag)) back.push_back(held);
  }
  Settle(tag, multiple, tags);
  requeued.insert(tags.begin(), tags.end());
  for (Held& held : back) {
    held.d.delivery_tag = next_tag_++;
    GiveBack(std::move(held));
  }
  return absl::OkStatus();
}

void InMemoryOutbox::Add(OutboxMessage row) {
  row.id = next_id_++;
  rows_[row.message_id] = std::move(row);
}

absl::StatusOr<AckTally> InMemoryOutbox::RecordAcks(const std::vector<std::string>& message_ids) {
  if (!fail_with.ok()) return fail_with;
  AckTally tally;
  for (const std::string& id : message_ids) {
    auto it = rows_.find(id);
    if (it == rows_.end()) continue;
    switch (OnAck(it->second, clock_.NowMillis())) {
      case AckEffect::kClosed: ++tally.closed; break;
      case AckEffect::kLateClosed: ++tally.late; break;
      case AckEffect::kAlreadySent: continue;
    }
    tally.create_to_sent_ms.push_back(it->second.sent_at - it->second.created_at);
  }
  return tally;
}

absl::Status InMemoryOutbox::RecordPublishFailure(const std::vector<std::string>& message_ids,
                                                  const std::string& error) {
  return RecordPublishFailure(message_ids, error, clock_.NowMillis());
}

absl::Status InMemoryOutbox::RecordPublishFailure(const std::vector<std::string>& message_ids,
                                                  const std::string& error, int64_t now_ms) {
  if (!fail_with.ok()) return fail_with;
  for (const std::string& id : message_ids) {
    auto it = rows_.find(id);
    if (it != rows_.end()) OnPublishFailure(it->second, error, now_ms);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<OutboxMessage*>> InMemoryOutbox::Due(int64_t now_ms, int limit,
                                                                const std::string& lease_holder) {
  if (!fail_with.ok()) return fail_with;
  if (!lease_holder.empty() && (lease.holder != lease_holder || lease.expires_at <= now_ms)) {
    return absl::FailedPreconditionError("recovery lease is not held by this instance");
  }
  std::vector<OutboxMessage*> due;
  for (auto& [id, row] : rows_) {
    if (row.status == OutboxStatus::kSending && row.next_retry_at <= now_ms) due.push_back(&row);
  }
  std::sort(due.begin(), due.end(), [](const OutboxMessage* a, const OutboxMessage* b) {
    return a->next_retry_at < b->next_retry_at;
  });
  if (static_cast<int>(due.size()) > limit) due.resize(limit);
  return due;
}

absl::StatusOr<int> InMemoryOutbox::DeferDue(int64_t now_ms, int limit,
                                             const std::string& lease_holder,
                                             const RetryPolicy& policy) {
  auto due = Due(now_ms, limit, lease_holder);
  if (!due.ok()) return due.status();
  int deferred = 0;
  for (OutboxMessage* row : *due) deferred += OnHold(*row, now_ms, policy);
  return deferred;
}

absl::StatusOr<OutboxMessage> InMemoryOutbox::Get(const std::string& message_id) {
  if (!fail_with.ok()) return fail_with;
  auto it = rows_.find(message_id);
  if (it == rows_.end()) {
    return absl::NotFoundError(absl::StrCat("message '", message_id, "' not found"));
  }
  return it->second;
}

absl::StatusOr<std::vector<OutboxMessage>> InMemoryOutbox::ListFailed(int limit) {
  if (!fail_with.ok()) return fail_with;
  // Oldest first: in the order the rows were written, as the stores list them.
  std::vector<OutboxMessage> out;
  for (const auto& [id, row] : rows_) {
    if (row.status == OutboxStatus::kFailed && row.failure_kind != kFailureRejected &&
        row.acknowledged_by.empty()) {
      out.push_back(row);
    }
  }
  std::sort(out.begin(), out.end(),
            [](const OutboxMessage& a, const OutboxMessage& b) { return a.id < b.id; });
  if (static_cast<int>(out.size()) > limit) out.resize(limit);
  return out;
}

absl::StatusOr<std::vector<FailureGroup>> InMemoryOutbox::FailureGroups(int limit,
                                                                        const std::string& kind) {
  if (!fail_with.ok()) return fail_with;
  std::map<std::string, FailureGroup> groups;
  std::map<std::string, int64_t> newest_id;
  for (const auto& [id, row] : rows_) {
    if (row.status != OutboxStatus::kFailed) continue;
    if (!kind.empty() && row.failure_kind != kind) continue;
    FailureGroup& g = groups[row.failure_group];
    if (g.count == 0 || row.updated_at < g.first_seen) g.first_seen = row.updated_at;
    g.last_seen = std::max(g.last_seen, row.updated_at);
    ++g.count;
    if (!row.acknowledged_by.empty()) ++g.acknowledged;
    if (row.id >= newest_id[row.failure_group]) {
      newest_id[row.failure_group] = row.id;
      g.group = row.failure_group;
      g.topic = row.topic;
      g.kind = row.failure_kind;
      g.pattern = FailurePattern(row.last_error);
      g.example_message_id = row.message_id;
      g.example_error = row.last_error;
    }
  }
  std::vector<FailureGroup> out;
  for (auto& [key, g] : groups) out.push_back(std::move(g));
  std::stable_sort(out.begin(), out.end(), [](const FailureGroup& a, const FailureGroup& b) {
    const int64_t open_a = a.count - a.acknowledged;
    const int64_t open_b = b.count - b.acknowledged;
    if (open_a != open_b) return open_a > open_b;
    return a.count != b.count ? a.count > b.count : a.group < b.group;
  });
  if (static_cast<int>(out.size()) > limit) out.resize(limit);
  return out;
}

absl::StatusOr<int> InMemoryOutbox::RecordRejects(const std::vector<Rejection>& rejects) {
  if (!fail_with.ok()) return fail_with;
  int changed = 0;
  for (const Rejection& r : rejects) {
    auto it = rows_.find(r.message_id);
    if (it != rows_.end() && OnReject(it->second, r.reason, clock_.NowMillis(), r.answered_at))
      ++changed;
  }
  return changed;
}

absl::StatusOr<Claimed> InMemoryOutbox::ClaimDue(int64_t now_ms, int limit,
                                                 const std::string& lease_holder,
                                                 const RetryPolicy& policy) {
  auto due = Due(now_ms, limit, lease_holder);
  if (!due.ok()) return due.status();
  Claimed claimed;
  for (OutboxMessage* row : *due) {
    switch (OnDue(*row, now_ms, policy)) {
      case DueAction::kRepublish: claimed.to_publish.push_back(*row); break;
      case DueAction::kExhausted: claimed.exhausted.push_back(*row); break;
      case DueAction::kNotDue: break;
    }
  }
  return claimed;
}

absl::StatusOr<bool> InMemoryOutbox::TryAcquireLease(const std::string& holder, int64_t now_ms,
                                                     int64_t ttl_ms) {
  if (!fail_with.ok()) return fail_with;
  if (!lease.holder.empty() && lease.holder != holder && lease.expires_at > now_ms) return false;
  lease = {holder, now_ms + ttl_ms};
  return true;
}

absl::Status InMemoryOutbox::ReleaseLease(const std::string& holder, int64_t now_ms) {
  if (!fail_with.ok()) return fail_with;
  if (lease.holder == holder) lease.expires_at = now_ms;
  return absl::OkStatus();
}

absl::StatusOr<LeaseState> InMemoryOutbox::Lease() {
  if (!fail_with.ok()) return fail_with;
  return lease;
}

absl::StatusOr<int> InMemoryOutbox::ArchiveSent(int64_t cutoff_ms, int batch) {
  if (!fail_with.ok()) return fail_with;
  int moved = 0;
  for (auto it = rows_.begin(); it != rows_.end() && moved < batch;) {
    if (it->second.status == OutboxStatus::kSent && it->second.sent_at < cutoff_ms) {
      archive.push_back(std::move(it->second));
      it = rows_.erase(it);
      ++moved;
    } else {
      ++it;
    }
  }
  archived += moved;
  return moved;
}

absl::StatusOr<int> InMemoryOutbox::PruneArchive(int64_t cutoff_ms, int batch) {
  if (!fail_with.ok()) return fail_with;
  // Oldest acknowledgement first, as the store's index walks them.
  std::stable_sort(
      archive.begin(), archive.end(),
      [](const OutboxMessage& a, const OutboxMessage& b) { return a.sent_at < b.sent_at; });
  int pruned = 0;
  while (pruned < batch && pruned < static_cast<int>(archive.size()) &&
         archive[pruned].sent_at < cutoff_ms) {
    ++pruned;
  }
  archive.erase(archive.begin(), archive.begin() + pruned);
  if (pruned > 0) archive_pruned_before = std::max(archive_pruned_before, cutoff_ms);
  return pruned;
}

absl::StatusOr<int> InMemoryOutbox::PruneAudit(int64_t cutoff_ms, int batch) {
  if (!fail_with.ok()) return fail_with;
  int pruned = 0;
  while (pruned < batch && !audit.empty() && audit.begin()->first < cutoff_ms) {
    audit.erase(audit.begin());
    ++pruned;
  }
  if (pruned > 0) audit_pruned_before = std::max(audit_pruned_before, cutoff_ms);
  return pruned;
}

absl::StatusOr<int64_t> InMemoryOutbox::CountSendingOlderThan(int64_t created_before_ms) {
  if (!fail_with.ok()) return fail_with;
  int64_t n = 0;
  for (const auto& [id, row] : rows_) {
    n += row.status == OutboxStatus::kSending && row.created_at < created_before_ms;
  }
  return n;
}

absl::StatusOr<std::vector<std::string>> InMemoryOutbox::TakenOver(
    const std::vector<std::string>& message_ids) {
  if (!fail_with.ok()) return fail_with;
  std::vector<std::string> taken;
  for (const std::string& id : message_ids) {
    auto it = rows_.find(id);
    if (it != rows_.end() &&
        (it->second.status != OutboxStatus::kSending || it->second.attempts > 1)) {
      taken.push_back(id);
    }
  }
  return taken;
}

absl::StatusOr<AckProgress> InMemoryOutbox::ReadAckProgress() {
  if (!fail_with.ok()) return fail_with;
  AckProgress p;
  for (const auto& [id, row] : rows_) {
    if (row.status == OutboxStatus::kSent) p.last_acked_at = std::max(p.last_acked_at, row.sent_at);
    if (row.status == OutboxStatus::kSending &&
        (p.first_due_at == 0 || row.next_retry_at < p.first_due_at)) {
      p.first_due_at = row.next_retry_at;
      p.first_due_published_at = row.last_attempt_at;
    }
  }
  return p;
}

struct FakeQueueBrowser::Broker {
  std::map<std::string, std::deque<Delivery>> queues;
  std::set<std::string> missing;
  uint64_t next_place = 0;
  // The places of the messages given back, which sit at the head of their
  // queue, in queue order.
  std::map<std::string, std::deque<uint64_t>> returned;
  Mutex mu;
  std::map<std::string, const FakeQueueBrowser*> locks ABSL_GUARDED_BY(mu);  // queue -> holder
};

FakeQueueBrowser::FakeQueueBrowser() : FakeQueueBrowser(std::make_shared<Broker>()) {}

FakeQueueBrowser::FakeQueueBrowser(std::shared_ptr<Broker> broker)
    : broker_(std::move(broker)), queues(broker_->queues), missing(broker_->missing) {}

FakeQueueBrowser::~FakeQueueBrowser() {
  Gone();
}

std::unique_ptr<FakeQueueBrowser> FakeQueueBrowser::OnSameBroker(FakeQueueBrowser& first) {
  return std::unique_ptr<FakeQueueBrowser>(new FakeQueueBrowser(first.broker_));
}

void FakeQueueBrowser::Gone() {
  PutBack(UINT64_MAX);
  MutexLock lock(&broker_->mu);
  for (auto it = broker_->locks.begin(); it != broker_->locks.end();) {
    it = it->second == this ? broker_->locks.erase(it) : std::next(it);
  }
}

void FakeQueueBrowser::Reset(const absl::Status& why) {
  DoReset(why);
  Gone();
  next_tag_ = 1;  // a new connection starts a new tag sequence
}

absl::Status FakeQueueBrowser::Live() {
  absl::Status s = Check();
  if (!s.ok()) Gone();  // the broker saw the connection go
  return s;
}

absl::StatusOr<QueueState> FakeQueueBrowser::Inspect(const std::string& queue) {
  if (absl::Status s = Live(); !s.ok()) return s;
  if (missing.count(queue)) return absl::NotFoundError("fake broker: no queue '" + queue + "'");
  return QueueState{static_cast<int64_t>(queues[queue].size()), 0};
}

void FakeQueueBrowser::CountTowardFailure(int& calls, int fail_at) {
  if (++calls == fail_at) Drop();
}

absl::StatusOr<Delivery> FakeQueueBrowser::Take(const std::string& queue) {
  CountTowardFailure(takes_, fail_take);
  if (absl::Status s = Live(); !s.ok()) return s;
  std::deque<Delivery>& ready = queues[queue];
  std::deque<uint64_t>& returned = broker_->returned[queue];
  while (returned.size() > ready.size()) returned.pop_back();  // the test emptied the queue
  if (ready.empty()) return Delivery{};
  Taken taken{queue, 0, std::move(ready.front())};
  ready.pop_front();
  if (returned.empty()) {
    taken.place = broker_->next_place++;
  } else {
    taken.place = returned.front();
    returned.pop_front();
  }
  taken.d.delivery_tag = next_tag_++;
  Delivery d = taken.d;
  unacked_[d.delivery_tag] = std::move(taken);
  if (on_take) on_take(d);
  return d;
}

absl::Status FakeQueueBrowser::Ack(uint64_t delivery_tag) {
  CountTowardFailure(acks_, fail_ack);
  if (absl::Status s = Live(); !s.ok()) return s;
  unacked_.erase(delivery_tag);
  acked.insert(delivery_tag);
  return absl::OkStatus();
}

absl::Status FakeQueueBrowser::Requeue(uint64_t delivery_tag, bool multiple) {
  if (absl::Status s = Live(); !s.ok()) return s;
  if (multiple) {
    PutBack(delivery_tag);
  } else if (auto it = unacked_.find(delivery_tag); it != unacked_.end()) {
    GiveBack(std::move(it->second));
    unacked_.erase(it);
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> FakeQueueBrowser::PublishConfirmed(const std::string& exchange,
                                                        const OutgoingMessage& message,
                                                        absl::Duration) {
  if (absl::Status s = Live(); !s.ok()) return s;
  if (!answer(exchange, message)) return false;
  published.emplace_back(exchange, message);
  return true;
}

absl::StatusOr<bool> FakeQueueBrowser::TryLock(const std::string& queue) {
  if (absl::Status s = Live(); !s.ok()) return s;
  MutexLock lock(&broker_->mu);
  const FakeQueueBrowser*& holder = broker_->locks[queue];
  if (holder == nullptr) holder = this;
  if (holder == this) return true;
  ++lock_refusals;
  return false;
}

absl::Status FakeQueueBrowser::Unlock(const std::string& queue) {
  if (absl::Status s = Live(); !s.ok()) return s;
  MutexLock lock(&broker_->mu);
  auto it = broker_->locks.find(queue);
  if (it != broker_->locks.end() && it->second == this) broker_->locks.erase(it);
  return absl::OkStatus();
}

void FakeQueueBrowser::PutBack(uint64_t tag) {
  for (auto it = unacked_.begin(); it != unacked_.end() && it->first <= tag;) {
    GiveBack(std::move(it->second));
    it = unacked_.erase(it);
  }
}

void FakeQueueBrowser::GiveBack(Taken taken) {
  std::deque<Delivery>& ready = queues[taken.queue];
  std::deque<uint64_t>& returned = broker_->returned[taken.queue];
  // Before the messages never taken and the given-back ones from later places.
  const size_t at = static_cast<size_t>(
      std::upper_bound(returned.begin(), returned.end(), taken.place) - returned.begin());
  taken.d.redelivered = true;
  ready.insert(ready.begin() + static_cast<std::ptrdiff_t>(std::min(at, ready.size())),
               std::move(taken.d));
  returned.insert(returned.begin() + static_cast<std::ptrdiff_t>(at), taken.place);
}

int RecordingAlerts::Active(const std::string& name) const {
  int n = 0;
  for (const Alert& a : raised) n += a.name == name;
  for (const Alert& a : resolved) n -= a.name == name;
  return n;
}

Delivery SignedBy(const MessageKeys& keys, Delivery d) {
  d.signature = keys.Sign(Forward(d, ""));
  return d;
}

}  // namespace outbox::testing
