#include "tests/support/queue_sink.h"

#include <cstdio>
#include <cstdlib>

#include "shared/amqp/amqp_client.h"
#include "tests/support/process.h"

namespace outbox::testing {

QueueSink::QueueSink(const std::string& amqp_url, const std::string& queue, Mode mode) {
  thread_ = std::thread([this, amqp_url, queue, mode] { Run(amqp_url, queue, mode); });
  if (!PollUntil([this] { return ready_.load(); }, absl::Seconds(10))) {
    std::fprintf(stderr, "QueueSink: could not consume %s\n", queue.c_str());
    std::abort();
  }
}

QueueSink::~QueueSink() {
  stop_ = true;
  thread_.join();
}

void QueueSink::Run(const std::string& amqp_url, const std::string& queue, Mode mode) {
  auto url = AmqpUrl::Parse(amqp_url);
  if (!url.ok()) return;
  auto conn = AmqpConnection::Connect(*url, "test-queue-sink");
  // Declared as payment_service declares it (the arguments must match), in
  // case it has not yet.
  if (!conn.ok() || !(*conn)->DeclareQueue(queue, "", kPaymentsExchange).ok() ||
      !(*conn)->Consume(queue, 100).ok()) {
    return;
  }
  ready_ = true;
  while (!stop_) {
    auto got = (*conn)->NextDeliveries(100, absl::Milliseconds(50));
    if (!got.ok()) return;
    for (const Delivery& d : *got) {
      absl::Status s = mode == Mode::kDrop ? (*conn)->Ack(d.delivery_tag, false)
                                           : (*conn)->Reject(d.delivery_tag);
      if (!s.ok()) return;
      ++taken_;
    }
  }
}

}  // namespace outbox::testing
