#pragma once

// Group commit: CreatePayment calls queue their request, the ack listener
// queues the message ids to mark SENT; one writer thread commits everything
// queued in one transaction (one fsync) and wakes each caller with its own
// outcome. Right after the commit, the new messages go to the publisher.
#include <atomic>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "payment_service/payment_store.h"
#include "shared/amqp_client.h"
#include "shared/backoff.h"
#include "shared/clock.h"
#include "shared/ids.h"

namespace outbox::payment {

struct WriterOptions {
  std::string pay_queue = "PAY_QUEUE";
  std::string reply_to = "ACC_QUEUE";
  int max_attempts = 10;
  LinearBackoff backoff;
  size_t max_batch = 512;
};

class PaymentWriter {
 public:
  using AfterCommit = std::function<void(std::vector<OutgoingMessage>)>;

  PaymentWriter(PaymentStore& store, const Clock& clock, IdGenerator& ids, WriterOptions options,
                AfterCommit after_commit);
  ~PaymentWriter();

  void Start();
  // Finishes every queued request, then stops the writer thread.
  void Stop();

  // Blocks until the request's group is committed (or failed).
  CreateOutcome Create(const PaymentInput& input);
  // Blocks until the rows are marked SENT in a group; returns how many changed.
  absl::StatusOr<int> MarkSent(const std::vector<std::string>& message_ids);

  int64_t groups_committed() const { return groups_.load(); }
  int64_t payments_created() const { return created_.load(); }

 private:
  struct Pending {
    const PaymentInput* input;
    CreateOutcome outcome;
    bool done = false;
  };
  struct PendingMark {
    const std::vector<std::string>* message_ids;
    absl::StatusOr<int> marked;
    bool done = false;
  };
  void Run();
  void CommitGroup(const std::vector<Pending*>& group, const std::vector<PendingMark*>& marks);

  PaymentStore& store_;
  const Clock& clock_;
  IdGenerator& ids_;
  const WriterOptions options_;
  const AfterCommit after_commit_;

  absl::Mutex mu_;
  std::deque<Pending*> queue_ ABSL_GUARDED_BY(mu_);
  std::deque<PendingMark*> marks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int64_t> groups_{0};
  std::atomic<int64_t> created_{0};
  std::thread thread_;
};

}  // namespace outbox::payment
