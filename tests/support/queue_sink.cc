#include "tests/support/queue_sink.h"

#include <cstdio>
#include <cstdlib>

#include "service_kit/topology.h"
#include "shared/amqp/internal/amqp_client.h"
#include "tests/support/process.h"

namespace outbox::testing {

QueueSink::QueueSink(const std::string& amqp_url, const std::string& queue, Mode mode,
                     const std::string& queue_type) {
  thread_ = std::thread(
      [this, amqp_url, queue, mode, queue_type] { Run(amqp_url, queue, mode, queue_type); });
  if (!PollUntil([this] { return ready_.load(); }, absl::Seconds(20))) {
    MutexLock lock(&mu_);
    std::fprintf(stderr, "QueueSink: could not consume %s: %s\n", queue.c_str(),
                 last_error_.c_str());
    std::abort();
  }
}

QueueSink::~QueueSink() {
  stop_ = true;
  thread_.join();
}

void QueueSink::Run(const std::string& amqp_url, const std::string& queue, Mode mode,
                    const std::string& queue_type) {
  auto url = AmqpUrl::Parse(amqp_url);
  if (!url.ok()) return;
  // A loaded machine (parallel tests, a cluster starting) can make the first
  // connection slow: try again until the constructor gives up.
  std::unique_ptr<AmqpConnection> conn;
  while (!stop_ && conn == nullptr) {
    auto c = AmqpConnection::Connect(*url, "test-queue-sink");
    // Declared as payment_service declares it (the arguments must match), in
    // case it has not yet.
    absl::Status s = c.status();
    if (s.ok()) s = (*c)->DeclareQueue(queue, queue_type, kPaymentsExchange);
    if (s.ok()) s = (*c)->Consume(queue, 100);
    if (s.ok()) {
      conn = *std::move(c);
    } else {
      {
        MutexLock lock(&mu_);
        last_error_ = std::string(s.message());
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
  }
  if (conn == nullptr) return;
  ready_ = true;
  while (!stop_) {
    auto got = conn->NextDeliveries(100, absl::Milliseconds(50));
    if (!got.ok()) return;
    for (const Delivery& d : *got) {
      absl::Status s =
          mode == Mode::kDrop ? conn->Ack(d.delivery_tag, false) : conn->Reject(d.delivery_tag);
      if (!s.ok()) return;
      ++taken_;
    }
  }
}

}  // namespace outbox::testing
