#include "payment_service/fast_publisher.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

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
  // Sliding window: keep publishing while up to `window` messages await their
  // confirms, and settle confirms as they arrive.
  struct InFlight {
    std::string message_id;
    absl::Time sent;
  };
  std::map<uint64_t, InFlight> in_flight;  // delivery tag -> message
  std::vector<std::string> failed;
  std::string error;
  auto fail_in_flight = [&](const absl::Status& why) {
    for (const auto& [tag, m] : in_flight) failed.push_back(m.message_id);
    in_flight.clear();
    error = std::string(why.message());
    session_.Reset(why);
  };
  auto report = [&](int64_t confirmed) {
    {
      absl::MutexLock lock(&mu_);
      stats_.confirmed += confirmed;
      stats_.failed += failed.size();
    }
    if (failed.empty()) return;
    LogWarning("fast_publish_failed", {KV("messages", failed.size()),
                                       KV("first_message_id", failed.front()), KV("error", error)});
    on_failure_(failed, error);
    failed.clear();
  };

  while (true) {
    bool stopping = false;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stopping_; };
      // With nothing in flight, sleep until there is work; wake at least every
      // second to keep the idle connection's heartbeats going.
      if (in_flight.empty()) mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Seconds(1));
      stopping = stopping_;
      if (stopping && queue_.empty() && in_flight.empty()) return;
    }
    auto conn = session_.Get();
    connected_ = conn.ok();
    if (!conn.ok()) {
      if (!in_flight.empty()) fail_in_flight(conn.status());
      report(0);
      if (stopping) return;  // whatever is queued stays SENDING for recovery
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(100));
      continue;
    }
    // Fill the window.
    std::vector<OutgoingMessage> batch;
    {
      absl::MutexLock lock(&mu_);
      while (!queue_.empty() && in_flight.size() + batch.size() < options_.window) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    const absl::Time now = absl::Now();
    for (size_t i = 0; i < batch.size(); ++i) {
      auto tag = (*conn)->Publish(batch[i]);
      if (!tag.ok()) {
        for (size_t k = i; k < batch.size(); ++k) failed.push_back(batch[k].message_id);
        fail_in_flight(tag.status());
        break;
      }
      in_flight[*tag] = {batch[i].message_id, now};
    }
    if (in_flight.empty()) {
      report(0);
      if (batch.empty()) {
        absl::Status s = (*conn)->Poll(absl::Milliseconds(1));
        if (!s.ok()) session_.Reset(s);
      }
      continue;
    }
    // Settle confirms: wait briefly only when there is nothing new to send.
    std::vector<AmqpConnection::Confirm> settled;
    bool more_waiting;
    {
      absl::MutexLock lock(&mu_);
      more_waiting = !queue_.empty() && in_flight.size() < options_.window;
    }
    absl::Status s = (*conn)->ReadConfirms(
        more_waiting ? absl::ZeroDuration() : absl::Milliseconds(20), &settled);
    int64_t confirmed = 0;
    for (const auto& c : settled) {
      auto it = in_flight.find(c.tag);
      if (it == in_flight.end()) continue;
      if (c.ok) {
        ++confirmed;
      } else {
        failed.push_back(it->second.message_id);
        error = "publish not confirmed by broker (nack or unroutable)";
      }
      in_flight.erase(it);
    }
    // Published and confirmed; the callers' replies race with this point.
    if (confirmed > 0) Failpoint(kFpPaymentAfterPublishBeforeReply);
    if (!s.ok()) {
      fail_in_flight(s);
    } else if (!in_flight.empty() &&
               absl::Now() - in_flight.begin()->second.sent > options_.confirm_timeout) {
      // A confirm this late means the connection is stuck: start over.
      fail_in_flight(absl::DeadlineExceededError("publish confirm timed out"));
    }
    report(confirmed);
  }
}

}  // namespace outbox::payment
