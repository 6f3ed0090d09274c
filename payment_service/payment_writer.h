#pragma once

// Group commit: CreatePayment calls queue their request, the ack listener
// queues the message ids to mark SENT; one writer thread commits everything
// queued in one transaction (one fsync) and hands each caller its own outcome
// through its completion callback (no thread waits per call). Right after the
// commit, the new messages go to the relay (shared/outbox/relay.h). It is the
// outbox repository of both the ack listener (acks ride the same group
// commit) and the relay (failure notes).
#include <atomic>
#include <cstdint>
#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/time/time.h"
#include "payment_service/payment_store.h"
#include "shared/base/clock.h"
#include "shared/base/ids.h"
#include "shared/base/mutex.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/repository.h"
#include "shared/outbox/retry_policy.h"

namespace outbox::payment {

struct WriterOptions {
  std::string pay_queue = "PAY_QUEUE";  // topic of the PaymentCreated events
  std::string reply_to = "ACC_QUEUE";   // where accounting acknowledges them
  RetryPolicy retry;                    // attempt 1 and the budget stored in each row
  size_t max_batch = 512;
  // Backpressure: while accounting replies (acks flowed in the last second)
  // but at least `max_unsent` payments are SENDING, new payments wait up to
  // `max_hold` before their group (acks meanwhile are marked at once), so a
  // closed loop of callers cannot outrun accounting and grow the backlog
  // without bound. 0 = off. In an accounting or broker outage no acks flow
  // and nothing is held.
  int64_t max_unsent = 512;
  absl::Duration max_hold = absl::Milliseconds(20);
  // Acknowledgements with no payment queued wait up to this long for new
  // payments to share their commit: at low rates one fsync serves both
  // instead of one each. Under load payments are always queued and nothing
  // waits. Zero: acknowledgements commit at once.
  absl::Duration ack_linger = absl::ZeroDuration();
};

class PaymentWriter final : public OutboxRepository {
 public:
  PaymentWriter(PaymentStore& store, const Clock& clock, IdGenerator& ids, MetricsRegistry& metrics,
                WriterOptions options);
  ~PaymentWriter() override;

  // Starts the writer thread; what it commits goes to `relay`. The relay is
  // handed over here rather than at construction because it, in turn, notes
  // its failures through this writer.
  void Start(RelayQueue& relay);
  // Finishes every queued request, then stops the writer thread.
  void Stop();

  // Runs once the request's group is committed (or failed), with its outcome.
  using CreateDone = absl::AnyInvocable<void(CreateOutcome) &&>;
  // Queues the request and returns at once. `done` runs on the writer thread
  // right after the commit (keep it short: every caller of the group waits
  // behind it), or here at once when the writer is stopping (UNAVAILABLE).
  // `traceparent` (W3C) goes with the outbox row and its message.
  void CreateAsync(PaymentInput input, std::string traceparent, CreateDone done);
  // The same, blocking until the outcome is there.
  CreateOutcome Create(const PaymentInput& input, const std::string& traceparent = "");
  // Blocks until the rows are marked SENT in a group.
  absl::StatusOr<AckTally> RecordAcks(const std::vector<std::string>& message_ids) override;
  // Closes rejected rows FAILED (its own short transaction).
  absl::StatusOr<int> RecordRejects(const std::vector<Rejection>& rejects) override {
    return store_.RecordRejects(rejects, clock_.NowMillis());
  }
  // Notes a failed publish on the rows (its own short transaction).
  absl::Status RecordPublishFailure(const std::vector<std::string>& message_ids,
                                    const std::string& error) override;
  // A read on the store's reader connection, not through the group queue.
  absl::StatusOr<std::vector<std::string>> TakenOver(
      const std::vector<std::string>& message_ids) override {
    return store_.TakenOver(message_ids);
  }

  int64_t groups_committed() const { return groups_.value(); }
  int64_t payments_created() const { return created_.value(); }
  int64_t holds() const { return holds_.value(); }
  int64_t ack_lingers() const { return ack_lingers_.value(); }

 private:
  struct Pending {
    PaymentInput input;
    std::string traceparent;
    CreateDone done;
  };
  struct PendingAcks {
    const std::vector<std::string>* message_ids;
    absl::StatusOr<AckTally> tally;
    bool done = false;
  };
  void Run();
  // After a commit: true when new payments should wait (see max_unsent).
  bool Lagging(bool acked_some);
  // One group: encodes the new payments, commits them with the acks in one
  // transaction, hands their messages to the relay, then answers the ack
  // batches and the callers.
  void CommitGroup(std::vector<Pending>& group, std::vector<PendingAcks*>& acks)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The group's rows (ids, PaymentCreated event, outbox row), its requests moved out.
  std::vector<NewPayment> Encode(std::vector<Pending>& group, int64_t now);
  // After the commit: the new payments' messages to the relay (past the
  // failpoint between commit and publish), their log lines and the counters.
  // The first `group_size` outcomes are the group's.
  // `written_at`: the group's time stamp (Unix ms), from which its rows'
  // first retry counts.
  void HandToRelay(const std::vector<CreateOutcome>& outcomes, size_t group_size,
                   int64_t written_at);
  // Hands each ack batch its part of the commit's tally (or its error), under mu_.
  void AnswerAcks(const absl::StatusOr<AckTally>& tally, const std::vector<PendingAcks*>& acks)
      ABSL_LOCKS_EXCLUDED(mu_);

  PaymentStore& store_;
  const Clock& clock_;
  IdGenerator& ids_;
  const WriterOptions options_;
  RelayQueue* relay_ = nullptr;  // set by Start, before the thread runs

  Mutex mu_;
  std::deque<Pending> queue_ ABSL_GUARDED_BY(mu_);
  std::vector<PendingAcks*> acks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Counter& groups_;
  Counter& created_;
  Counter& holds_;
  Counter& ack_lingers_;      // acknowledgements that waited for a payment to share their commit
  Counter& commit_failures_;  // group transactions the file refused (full, damaged)
  DurationHistogram& create_to_sent_;
  int64_t last_ack_ms_ = INT64_MIN / 2;          // writer thread only; none yet
  int64_t last_count_error_ms_ = INT64_MIN / 2;  // when Lagging last logged a failed count
  std::thread thread_;
};

}  // namespace outbox::payment
