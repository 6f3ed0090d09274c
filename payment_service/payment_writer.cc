#include "payment_service/payment_writer.h"

#include <utility>

#include "payment_service/payment_codec.h"
#include "shared/failpoint.h"

namespace outbox::payment {

PaymentWriter::PaymentWriter(PaymentStore& store, const Clock& clock, IdGenerator& ids,
                             WriterOptions options, AfterCommit after_commit)
    : store_(store),
      clock_(clock),
      ids_(ids),
      options_(std::move(options)),
      after_commit_(std::move(after_commit)) {}

PaymentWriter::~PaymentWriter() { Stop(); }

void PaymentWriter::Start() { thread_ = std::thread([this] { Run(); }); }

void PaymentWriter::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

CreateOutcome PaymentWriter::Create(const PaymentInput& input) {
  Pending pending{&input, {}, false};
  absl::MutexLock lock(&mu_);
  if (stopping_) {
    pending.outcome.status = absl::UnavailableError("payment service is shutting down");
    return pending.outcome;
  }
  queue_.push_back(&pending);
  mu_.Await(absl::Condition(&pending.done));
  return std::move(pending.outcome);
}

void PaymentWriter::Run() {
  while (true) {
    std::vector<Pending*> group;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return !queue_.empty() || stopping_;
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping and drained
      while (!queue_.empty() && group.size() < options_.max_batch) {
        group.push_back(queue_.front());
        queue_.pop_front();
      }
    }
    CommitGroup(group);
  }
}

void PaymentWriter::CommitGroup(const std::vector<Pending*>& group) {
  const int64_t now = clock_.NowMillis();
  std::vector<NewPayment> batch;
  batch.reserve(group.size());
  for (Pending* p : group) {
    NewPayment n;
    n.input = *p->input;
    n.payment_id = ids_.NewId();
    OutboxRow& row = n.outbox;
    row.message_id = ids_.NewId();
    row.biz_type = kBizType;
    row.biz_key = n.payment_id;
    row.topic = options_.pay_queue;
    row.payload = EncodePaymentCreated(row.message_id, n.payment_id, n.input, now);
    row.status = OutboxStatus::kSending;
    // The fast-path publish right after the commit is attempt 1.
    row.attempts = 1;
    row.max_attempts = options_.max_attempts;
    row.last_attempt_at = now;
    row.next_retry_at = now + absl::ToInt64Milliseconds(options_.backoff.After(1));
    row.created_at = now;
    row.updated_at = now;
    batch.push_back(std::move(n));
  }
  std::vector<CreateOutcome> outcomes = store_.CreateBatch(batch);

  std::vector<OutgoingMessage> messages;
  for (size_t i = 0; i < group.size(); ++i) {
    const CreateOutcome& out = outcomes[i];
    if (!out.status.ok() || out.replayed) continue;
    const OutboxRow& row = out.record.outbox;
    messages.push_back({row.topic, row.message_id, row.payload, options_.reply_to, "PaymentCreated"});
  }
  Failpoint(kFpPaymentAfterCommitBeforePublish);
  ++groups_;
  created_ += messages.size();
  if (!messages.empty()) after_commit_(std::move(messages));

  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < group.size(); ++i) {
    group[i]->outcome = std::move(outcomes[i]);
    group[i]->done = true;
  }
}

}  // namespace outbox::payment
