#include "payment_service/payment_writer.h"

#include <algorithm>
#include <utility>

#include "payment_service/payment_codec.h"
#include "service_kit/failpoints.h"
#include "shared/base/mutex.h"
#include "shared/observability/log.h"
#include "shared/observability/trace.h"
#include "shared/outbox/state_machine.h"
#include "shared/runtime/failpoint.h"

namespace outbox::payment {

namespace {

// The next ack batch's share of what is `left` of the group's tally, taken off it.
AckTally TakeShare(AckTally& left, int room) {
  AckTally mine;
  mine.closed = std::min(left.closed, room);
  mine.late = std::min(left.late, room - mine.closed);
  left.closed -= mine.closed;
  left.late -= mine.late;
  // The latencies of the rows this batch turned SENT, in the same order.
  const auto taken = left.create_to_sent_ms.begin() +
                     std::min<size_t>(mine.changed(), left.create_to_sent_ms.size());
  mine.create_to_sent_ms.assign(left.create_to_sent_ms.begin(), taken);
  left.create_to_sent_ms.erase(left.create_to_sent_ms.begin(), taken);
  return mine;
}

}  // namespace

PaymentWriter::PaymentWriter(PaymentStore& store, const Clock& clock, IdGenerator& ids,
                             MetricsRegistry& metrics, WriterOptions options)
    : store_(store),
      clock_(clock),
      ids_(ids),
      options_(std::move(options)),
      groups_(metrics.AddCounter("outbox_group_commits_total", "write transactions (groups)")),
      created_(metrics.AddCounter("outbox_payments_created_total", "payments committed")),
      holds_(metrics.AddCounter("outbox_writer_holds_total",
                                "groups of new payments held back while accounting lagged")),
      ack_lingers_(metrics.AddCounter(
          "outbox_writer_ack_lingers_total",
          "acknowledgements that waited (up to --ack_linger_ms) for a payment to share their "
          "commit")),
      commit_failures_(StoreWriteFailures(metrics, "commit_group")),
      create_to_sent_(metrics.AddDurationHistogram(
          "outbox_create_to_sent_seconds",
          "from a payment's commit to its outbox row turning SENT (accounting's reply applied)")) {}

PaymentWriter::~PaymentWriter() {
  Stop();
}

void PaymentWriter::Start(RelayQueue& relay) {
  relay_ = &relay;
  thread_ = std::thread([this] { Run(); });
}

void PaymentWriter::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void PaymentWriter::CreateAsync(PaymentInput input, std::string traceparent, CreateDone done) {
  {
    MutexLock lock(&mu_);
    if (!stopping_) {
      queue_.push_back({std::move(input), std::move(traceparent), std::move(done)});
      return;
    }
  }
  CreateOutcome refused;
  refused.status = absl::UnavailableError("payment service is shutting down");
  std::move(done)(std::move(refused));
}

CreateOutcome PaymentWriter::Create(const PaymentInput& input, const std::string& traceparent) {
  CreateOutcome outcome;
  Notification done;  // outbox::Notification: TSan sees it (shared/base/mutex.h)
  CreateAsync(input, traceparent, [&](CreateOutcome out) {
    outcome = std::move(out);
    done.Notify();
  });
  done.WaitForNotification();
  return outcome;
}

absl::Status PaymentWriter::RecordPublishFailure(const std::vector<std::string>& message_ids,
                                                 const std::string& error) {
  return store_.RecordPublishFailure(message_ids, error, clock_.NowMillis());
}

absl::StatusOr<AckTally> PaymentWriter::RecordAcks(const std::vector<std::string>& message_ids) {
  PendingAcks pending{&message_ids, AckTally{}, false};
  MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("payment service is shutting down");
  acks_.push_back(&pending);
  mu_.Await(absl::Condition(&pending.done));
  return pending.tally;
}

void PaymentWriter::Run() {
  absl::Time hold_until = absl::InfinitePast();  // new payments wait until then
  while (true) {
    std::vector<Pending> group;
    std::vector<PendingAcks*> acks;
    {
      MutexLock lock(&mu_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return !queue_.empty() || !acks_.empty() || stopping_;
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty() && acks_.empty()) return;  // stopping and drained
      if (queue_.empty() && !stopping_ && options_.ack_linger > absl::ZeroDuration()) {
        // Only acknowledgements: give new payments a moment to share the commit.
        auto payment_or_stop = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
          return !queue_.empty() || stopping_;
        };
        ack_lingers_.Add();
        mu_.AwaitWithTimeout(absl::Condition(&payment_or_stop), options_.ack_linger);
      }
      bool hold = acks_.empty() && !stopping_ && clock_.Now() < hold_until;
      if (hold) {
        // Accounting lags: acks go first (each lowers the backlog); new
        // payments wait for one, or for the end of the hold.
        holds_.Add();
        auto ack_or_stop = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
          return !acks_.empty() || stopping_;
        };
        mu_.AwaitWithTimeout(absl::Condition(&ack_or_stop), hold_until - clock_.Now());
        hold = !acks_.empty() && !stopping_;  // commit those acks alone first
      }
      while (!hold && !queue_.empty() && group.size() < options_.max_batch) {
        group.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      acks.swap(acks_);
    }
    CommitGroup(group, acks);
    const bool acked_some = !acks.empty();
    // A hold starts after a group of new payments (or once the last one is
    // over), never extended by the acks committed during it: no payment
    // waits longer than max_hold for the backlog.
    const absl::Time now = clock_.Now();
    if (!Lagging(acked_some)) {
      hold_until = absl::InfinitePast();
    } else if (!group.empty() || now >= hold_until) {
      hold_until = now + options_.max_hold;
    }
  }
}

bool PaymentWriter::Lagging(bool acked_some) {
  if (options_.max_unsent <= 0) return false;
  const int64_t now = clock_.NowMillis();
  if (acked_some) last_ack_ms_ = now;
  // No acks for a second: accounting (or the broker) is away, recovery's
  // business; holding callers would only make the outage theirs.
  if (now - last_ack_ms_ > 1000) return false;
  absl::StatusOr<int64_t> sending = store_.CountSending(options_.max_unsent);
  if (!sending.ok()) {
    // Not known: creates are not held (the next group asks again). Logged
    // once a minute at most, while it lasts.
    if (now - last_count_error_ms_ >= 60'000) {
      LogWarning("unsent_count_failed", {KV("error", sending.status().message())});
      last_count_error_ms_ = now;
    }
    return false;
  }
  return *sending >= options_.max_unsent;
}

std::vector<NewPayment> PaymentWriter::Encode(std::vector<Pending>& group, int64_t now) {
  std::vector<NewPayment> batch;
  batch.reserve(group.size());
  for (Pending& p : group) {
    NewPayment n;
    n.input = std::move(p.input);
    n.payment_id = ids_.NewId();
    MessageSpec spec;
    spec.message_id = ids_.NewId();
    spec.biz_type = kBizType;
    spec.biz_key = n.payment_id;
    spec.topic = options_.pay_queue;
    spec.message_type = kPaymentCreatedType;
    spec.reply_to = options_.reply_to;
    spec.payload = EncodePaymentCreated(spec.message_id, n.payment_id, n.input, now);
    spec.traceparent = std::move(p.traceparent);
    n.outbox = NewOutboxMessage(std::move(spec), now, options_.retry);
    batch.push_back(std::move(n));
  }
  return batch;
}

void PaymentWriter::HandToRelay(const std::vector<CreateOutcome>& outcomes, size_t group_size,
                                int64_t written_at) {
  std::vector<OutgoingMessage> messages;
  for (size_t i = 0; i < group_size; ++i) {
    const CreateOutcome& out = outcomes[i];
    if (!out.status.ok() || out.replayed) continue;
    messages.push_back(ToOutgoing(out.record.outbox));
  }
  Failpoint(kFpPaymentAfterCommitBeforePublish);
  if (LogEnabled(LogLevel::kDebug)) {
    for (const CreateOutcome& out : outcomes) {
      if (!out.status.ok() || out.replayed) continue;
      LogDebug("payment_created", {KV("payment_id", out.record.payment_id),
                                   KV("message_id", out.record.outbox.message_id),
                                   KV("trace_id", TraceIdOf(out.record.outbox.traceparent))});
    }
  }
  groups_.Add();
  created_.Add(static_cast<int64_t>(messages.size()));
  if (!messages.empty()) relay_->Enqueue(std::move(messages), absl::FromUnixMillis(written_at));
}

void PaymentWriter::AnswerAcks(const absl::StatusOr<AckTally>& tally,
                               const std::vector<PendingAcks*>& acks) {
  if (acks.empty()) return;
  MutexLock lock(&mu_);
  // Each ack batch learns its own counts only roughly (the group's tally is
  // split in order; there is one ack listener, so nearly always one batch);
  // what matters to it is success or failure.
  AckTally left = tally.ok() ? *tally : AckTally{};
  for (PendingAcks* m : acks) {
    if (!tally.ok()) {
      m->tally = tally.status();
    } else {
      m->tally = TakeShare(left, static_cast<int>(m->message_ids->size()));
    }
    m->done = true;
  }
}

void PaymentWriter::CommitGroup(std::vector<Pending>& group, std::vector<PendingAcks*>& acks) {
  const int64_t now = clock_.NowMillis();
  std::vector<NewPayment> batch = Encode(group, now);
  // Acks that came in while the group was being encoded ride this commit
  // too, rather than waiting a whole cycle for the next one.
  {
    MutexLock lock(&mu_);
    acks.insert(acks.end(), acks_.begin(), acks_.end());
    acks_.clear();
  }
  std::vector<std::string> ack_ids;
  for (const PendingAcks* m : acks) {
    ack_ids.insert(ack_ids.end(), m->message_ids->begin(), m->message_ids->end());
  }
  absl::StatusOr<AckTally> tally = AckTally{};
  std::vector<CreateOutcome> outcomes = store_.CommitGroup(batch, ack_ids, now, &tally);
  if (!tally.ok()) commit_failures_.Add();  // the transaction itself failed

  HandToRelay(outcomes, group.size(), now);
  if (tally.ok()) {
    for (int64_t ms : tally->create_to_sent_ms) create_to_sent_.Observe(absl::Milliseconds(ms));
  }
  // The ack listener first: its rows are SENT now, and it acks them while
  // the callers below are answered.
  AnswerAcks(tally, acks);

  // The callers' completions, outside the lock: calls queueing meanwhile
  // join the next group.
  for (size_t i = 0; i < group.size(); ++i) std::move(group[i].done)(std::move(outcomes[i]));
}

}  // namespace outbox::payment
