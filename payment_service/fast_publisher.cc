#include "payment_service/fast_publisher.h"

#include <utility>

#include "shared/failpoint.h"
#include "shared/log.h"

namespace outbox::payment {

FastPublisher::FastPublisher(AmqpUrl url, Topology topology, PublisherOptions options,
                             OnFailure on_failure)
    : session_(std::move(url), std::move(topology), "payment-fast-publisher",
               [](AmqpConnection& c) { return c.EnableConfirms(); }),
      options_(options),
      on_failure_(std::move(on_failure)) {}

FastPublisher::~FastPublisher() { Stop(); }

void FastPublisher::Start() { thread_ = std::thread([this] { Run(); }); }

void FastPublisher::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void FastPublisher::Enqueue(std::vector<OutgoingMessage> messages) {
  absl::MutexLock lock(&mu_);
  for (OutgoingMessage& m : messages) {
    if (queue_.size() >= options_.capacity) {
      ++stats_.dropped;  // the row stays SENDING; recovery re-publishes it
      continue;
    }
    queue_.push_back(std::move(m));
  }
}

PublisherStats FastPublisher::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

void FastPublisher::Run() {
  while (true) {
    std::vector<OutgoingMessage> batch;
    bool stopping = false;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return !queue_.empty() || stopping_;
      };
      // Wake at least every second to keep the idle connection's heartbeats going.
      mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(1));
      stopping = stopping_;
    }
    auto conn = session_.Get();
    connected_ = conn.ok();
    if (!conn.ok()) {
      if (stopping) return;  // whatever is queued stays SENDING for recovery
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(100));
      continue;
    }
    {
      absl::MutexLock lock(&mu_);
      while (!queue_.empty() && batch.size() < options_.window) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    if (batch.empty()) {
      if (stopping) return;
      absl::Status s = (*conn)->Poll(absl::Milliseconds(1));
      if (!s.ok()) session_.Reset(s);
      continue;
    }
    auto confirmed = (*conn)->PublishConfirmed(batch, options_.confirm_timeout);
    // Published and confirmed; the callers' replies race with this point.
    if (confirmed.ok()) Failpoint(kFpPaymentAfterPublishBeforeReply);
    std::vector<std::string> failed;
    std::string error;
    if (!confirmed.ok()) {
      error = std::string(confirmed.status().message());
      session_.Reset(confirmed.status());
      for (const OutgoingMessage& m : batch) failed.push_back(m.message_id);
    } else {
      error = "publish not confirmed by broker (nack, return or timeout)";
      for (size_t i = 0; i < batch.size(); ++i) {
        if (!(*confirmed)[i]) failed.push_back(batch[i].message_id);
      }
    }
    {
      absl::MutexLock lock(&mu_);
      stats_.confirmed += batch.size() - failed.size();
      stats_.failed += failed.size();
    }
    if (!failed.empty()) {
      LogWarning("fast_publish_failed", {KV("messages", failed.size()), KV("first_message_id", failed.front()),
                                         KV("error", error)});
      on_failure_(failed, error);
    }
  }
}

}  // namespace outbox::payment
