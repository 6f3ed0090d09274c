#pragma once

// Test doubles for the seams in shared/outbox: a broker that answers as the
// test says, an outbox held in memory (using the real state machine), and an
// alert sink that remembers. Not thread-safe: tests drive a worker's Step()
// from the test thread.
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "shared/base/internal/mutex.h"
#include "shared/observability/internal/alerts.h"
#include "shared/outbox/message_auth.h"
#include "shared/outbox/repository.h"
#include "shared/outbox/transport.h"
#include "shared/testing/manual_clock.h"

namespace outbox::testing {

// Connection state shared by the fake publisher and consumer.
class FakeLink {
 public:
  bool reachable = true;            // Connect() fails while false
  int connects = 0;                 // successful Connect() calls that made a new connection
  std::vector<std::string> resets;  // why each Reset happened

  // Breaks the current connection as a dead socket does: the next operation
  // on it fails, and Connect() then makes a new one.
  void Drop() { broken_ = true; }
  int64_t lost() const { return drops_; }

 protected:
  absl::Status DoConnect();
  absl::Status Check();
  void DoReset(const absl::Status& why);
  bool connected_ = false;
  bool broken_ = false;
  int64_t drops_ = 0;
};

class FakePublisher final : public MessagePublisher, public FakeLink {
 public:
  enum class Answer { kAck, kNack, kReturn, kSilent };
  // How the broker answers each message (default: ack).
  std::function<Answer(const OutgoingMessage&)> answer = [](const OutgoingMessage&) {
    return Answer::kAck;
  };
  // When set, ReadConfirms advances it by the time it was asked to wait while
  // nothing was settled (so confirm timeouts can elapse in a test).
  ManualClock* clock = nullptr;
  // While set, answers are kept back: ReadConfirms settles nothing.
  bool hold_confirms = false;
  std::vector<OutgoingMessage> published;  // every message the broker took

  // What Inspect() reports, by queue (unknown queues: empty, one consumer),
  // and queues that do not exist (NOT_FOUND; the connection breaks, as the
  // broker closes the channel).
  std::map<std::string, QueueState> queues;
  std::set<std::string> missing;
  int inspections = 0;

  absl::Status Connect() override { return DoConnect(); }
  bool connected() const override { return connected_; }
  bool up() const override { return connected_; }
  int64_t drops() const override { return drops_; }
  void Reset(const absl::Status& why) override;
  absl::Status Poll(absl::Duration) override { return Check(); }
  absl::StatusOr<uint64_t> Publish(const OutgoingMessage& message) override;
  absl::Status ReadConfirms(absl::Duration wait, std::vector<Confirm>* settled) override;
  absl::StatusOr<QueueState> Inspect(const std::string& queue) override;

  size_t unconfirmed() const { return pending_.size(); }

 private:
  uint64_t next_tag_ = 1;
  std::deque<Confirm> pending_;  // answered, not yet read
  std::set<uint64_t> silent_;    // never answered
};

// The delivery a consumer of `m`'s queue receives (tag 0: FakeConsumer::Push
// gives it one).
Delivery DeliveryOf(const OutgoingMessage& m);

// `d` carrying the signature `keys` gives it when it is sent: what a
// consumer under test receives from a sender holding those keys.
Delivery SignedBy(const MessageKeys& keys, Delivery d);

class FakeConsumer final : public MessageConsumer, public FakeLink {
 public:
  // Queues a delivery; its tag is assigned here (1, 2, ...).
  uint64_t Push(Delivery d);

  std::set<uint64_t> acked, rejected, requeued;  // settled tags
  std::vector<Delivery> dead_lettered;           // rejected, in order: what the DLQ gets
  int nexts = 0;                                 // calls of Next
  // Called at the start of each Next with its number (1, 2, ...): a test
  // pushes what "arrives" while a consumer waits.
  std::function<void(int)> on_next;

  absl::Status Connect() override { return DoConnect(); }
  bool connected() const override { return connected_; }
  bool up() const override { return connected_; }
  int64_t drops() const override { return drops_; }
  void Reset(const absl::Status& why) override;
  absl::Status Poll(absl::Duration) override { return Check(); }
  absl::StatusOr<std::vector<Delivery>> Next(size_t max, absl::Duration wait) override;
  absl::Status Ack(uint64_t tag, bool multiple) override;
  absl::Status Reject(uint64_t tag) override;
  absl::Status Requeue(uint64_t tag, bool multiple) override;

  size_t ready() const { return ready_.size(); }

 private:
  // A message and its place in the queue: one requeued or given back by a
  // reset returns to that place, as the broker puts it back.
  struct Held {
    uint64_t place = 0;
    Delivery d;
  };
  void Settle(uint64_t tag, bool multiple, std::set<uint64_t>& into);
  void GiveBack(Held held);
  uint64_t next_tag_ = 1;
  uint64_t next_place_ = 0;
  std::deque<Held> ready_;            // by place
  std::map<uint64_t, Held> unacked_;  // by tag
};

// Queues of parked messages an operator browses. Taken messages stay
// unacked until Ack; Requeue and Reset put each back at its place in its
// queue, as the broker does. OnSameBroker gives a second connection to the
// same queues, as another process has; TryLock's locks are the broker's.
class FakeQueueBrowser final : public QueueBrowser, public FakeLink {
 private:
  struct Broker;                    // what the connections to one broker share
  std::shared_ptr<Broker> broker_;  // first: `queues` and `missing` refer into it

 public:
  FakeQueueBrowser();
  ~FakeQueueBrowser() override;  // a lock held goes with the connection
  FakeQueueBrowser(const FakeQueueBrowser&) = delete;
  FakeQueueBrowser& operator=(const FakeQueueBrowser&) = delete;
  // Another connection to `first`'s broker: the same queues, missing queues
  // and locks; its own connection, unacked messages, tags, `answer`,
  // `published`, `acked` and failures.
  static std::unique_ptr<FakeQueueBrowser> OnSameBroker(FakeQueueBrowser& first);

  std::map<std::string, std::deque<Delivery>>& queues;  // ready messages
  std::set<std::string>& missing;                       // Inspect: NOT_FOUND
  // How the broker answers each publish (default: confirmed); the test may
  // also route the message somewhere.
  std::function<bool(const std::string& exchange, const OutgoingMessage&)> answer =
      [](const std::string&, const OutgoingMessage&) { return true; };
  std::vector<std::pair<std::string, OutgoingMessage>> published;  // exchange, message
  std::set<uint64_t> acked;
  // The n-th call of Take or Ack (1, 2, ..., counted from the start; 0:
  // none) finds the connection dead, as when the broker goes away in the
  // middle of a pass.
  int fail_take = 0;
  int fail_ack = 0;
  // Called with each message Take hands out, once it is unacked: a test
  // may pause a pass there (and look from another connection meanwhile).
  std::function<void(const Delivery&)> on_take;
  // Calls of Poll, and of TryLock that found the lock held by another
  // connection (a test may read them while another thread polls or waits).
  std::atomic<int> polls{0};
  std::atomic<int> lock_refusals{0};

  absl::Status Connect() override { return DoConnect(); }
  bool connected() const override { return connected_; }
  bool up() const override { return connected_; }
  int64_t drops() const override { return drops_; }
  void Reset(const absl::Status& why) override;
  absl::Status Poll(absl::Duration) override {
    ++polls;
    return Live();
  }
  absl::StatusOr<QueueState> Inspect(const std::string& queue) override;
  absl::StatusOr<Delivery> Take(const std::string& queue) override;
  absl::Status Ack(uint64_t delivery_tag) override;
  absl::Status Requeue(uint64_t delivery_tag, bool multiple) override;
  absl::StatusOr<bool> PublishConfirmed(const std::string& exchange, const OutgoingMessage& message,
                                        absl::Duration timeout) override;
  // Thread-safe, unlike the rest: a test may hold a lock in one thread while
  // another connection asks for it in another.
  absl::StatusOr<bool> TryLock(const std::string& queue) override;
  absl::Status Unlock(const std::string& queue) override;

 private:
  explicit FakeQueueBrowser(std::shared_ptr<Broker> broker);
  // Check(), and a lost connection gives its unacked messages back and its
  // locks up.
  absl::Status Live();
  // What the broker does when this connection goes.
  void Gone();
  struct Taken {
    std::string queue;
    uint64_t place = 0;  // in its queue: where a requeue or a reset puts it back
    Delivery d;
  };
  // Puts unacked messages with tags up to `tag` (all: UINT64_MAX) back.
  void PutBack(uint64_t tag);
  void GiveBack(Taken taken);
  // Counts a call toward `fail_at` (fail_take, fail_ack) and drops the
  // connection at that call.
  void CountTowardFailure(int& calls, int fail_at);
  int takes_ = 0;
  int acks_ = 0;
  uint64_t next_tag_ = 1;
  std::map<uint64_t, Taken> unacked_;  // by tag
};

class RecordingAlerts final : public AlertSink {
 public:
  void Raise(Alert alert) override { raised.push_back(std::move(alert)); }
  void Resolve(Alert alert) override { resolved.push_back(std::move(alert)); }
  void Refresh(Alert alert) override { refreshed.push_back(std::move(alert)); }
  std::vector<Alert> raised, resolved, refreshed;
  // Raised and not resolved since, by name.
  int Active(const std::string& name) const;
};

// The outbox table in memory, for both seams, applying the real transitions.
// A consumer's inbox in memory: processed ids by processed_at.
class InMemoryProcessedLog final : public ProcessedLog {
 public:
  std::multimap<int64_t, std::string> rows;  // processed_at -> message id
  std::vector<int> limits;                   // each call's limit
  absl::Status fail_with;                    // when not OK every call returns it

  absl::StatusOr<int> PruneProcessed(int64_t cutoff_ms, int limit) override {
    limits.push_back(limit);
    if (!fail_with.ok()) return fail_with;
    int n = 0;
    while (n < limit && !rows.empty() && rows.begin()->first < cutoff_ms) {
      rows.erase(rows.begin());
      ++n;
    }
    return n;
  }
};

// The relay a group writer (shared/sqlite/internal/group_writer.h) hands committed
// messages to, with their time stamp, in order. Thread-safe: the writer's
// thread enqueues while the test reads.
class RecordingRelay final : public RelayQueue {
 public:
  using RelayQueue::Enqueue;
  void Enqueue(std::vector<OutgoingMessage> messages, absl::Time written_at) override {
    MutexLock lock(&mu_);
    for (OutgoingMessage& m : messages) {
      published_.push_back(std::move(m));
      written_at_.push_back(written_at);
    }
  }
  std::vector<std::string> ids() {
    MutexLock lock(&mu_);
    std::vector<std::string> ids;
    for (const OutgoingMessage& m : published_) ids.push_back(m.message_id);
    return ids;
  }
  std::vector<absl::Time> written_at() {
    MutexLock lock(&mu_);
    return written_at_;
  }

 private:
  Mutex mu_;
  std::vector<OutgoingMessage> published_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> written_at_ ABSL_GUARDED_BY(mu_);
};

class InMemoryOutbox final : public OutboxRepository, public RecoveryRepository {
 public:
  explicit InMemoryOutbox(const Clock& clock) : clock_(clock) {}

  absl::Status fail_with;  // when not OK every call returns it

  void Add(OutboxMessage row);
  const OutboxMessage& Row(const std::string& message_id) const { return rows_.at(message_id); }

  absl::StatusOr<AckTally> RecordAcks(const std::vector<std::string>& message_ids) override;
  absl::StatusOr<OutboxMessage> Get(const std::string& message_id) override;
  absl::Status RecordPublishFailure(const std::vector<std::string>& message_ids,
                                    const std::string& error) override;
  absl::StatusOr<Claimed> ClaimDue(int64_t now_ms, int limit, const std::string& lease_holder,
                                   const RetryPolicy& policy) override;
  absl::StatusOr<int> DeferDue(int64_t now_ms, int limit, const std::string& lease_holder,
                               const RetryPolicy& policy) override;
  absl::StatusOr<std::vector<OutboxMessage>> ListFailed(int limit) override;
  absl::StatusOr<std::vector<FailureGroup>> FailureGroups(int limit,
                                                          const std::string& kind) override;
  absl::StatusOr<int> RecordRejects(const std::vector<Rejection>& rejects) override;
  absl::Status RecordPublishFailure(const std::vector<std::string>& message_ids,
                                    const std::string& error, int64_t now_ms) override;
  absl::StatusOr<bool> TryAcquireLease(const std::string& holder, int64_t now_ms,
                                       int64_t ttl_ms) override;
  absl::Status ReleaseLease(const std::string& holder, int64_t now_ms) override;
  absl::StatusOr<LeaseState> Lease() override;
  absl::StatusOr<int> ArchiveSent(int64_t cutoff_ms, int batch) override;
  absl::StatusOr<int> PruneArchive(int64_t cutoff_ms, int batch) override;
  absl::StatusOr<int> PruneAudit(int64_t cutoff_ms, int batch) override;
  absl::StatusOr<int64_t> CountSendingOlderThan(int64_t created_before_ms) override;
  absl::StatusOr<std::vector<std::string>> TakenOver(
      const std::vector<std::string>& message_ids) override;
  absl::StatusOr<AckProgress> ReadAckProgress() override;

  LeaseState lease;
  int64_t archived = 0;                       // rows ever moved to the archive
  std::vector<OutboxMessage> archive;         // the archive, in the order rows moved
  std::multimap<int64_t, std::string> audit;  // audit records: at -> action
  // The watermarks Prune* raise (0: nothing pruned yet).
  int64_t archive_pruned_before = 0;
  int64_t audit_pruned_before = 0;

 private:
  // Due SENDING rows, oldest due first, after the lease fence.
  absl::StatusOr<std::vector<OutboxMessage*>> Due(int64_t now_ms, int limit,
                                                  const std::string& lease_holder);

  const Clock& clock_;
  int64_t next_id_ = 1;
  std::map<std::string, OutboxMessage> rows_;
};

}  // namespace outbox::testing
