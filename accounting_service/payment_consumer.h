#pragma once

// Consumes PAY_QUEUE in batches: decode, apply the batch in one transaction,
// publish every reply (new or duplicate) to ACC_QUEUE pipelined with
// confirms, and only then ack the deliveries with `multiple`. A message that
// cannot be decoded or validated is dead-lettered at once.
#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "accounting_service/voucher_store.h"
#include "shared/alerts.h"
#include "shared/amqp_session.h"
#include "shared/clock.h"

namespace outbox::accounting {

struct ConsumerOptions {
  int prefetch = 256;
  absl::Duration confirm_timeout = absl::Seconds(5);
};

struct ConsumerStats {
  std::atomic<int64_t> applied{0};     // vouchers created
  std::atomic<int64_t> duplicates{0};  // messages seen before, replied to again
  std::atomic<int64_t> dead_lettered{0};
  std::atomic<int64_t> requeued{0};
};

class PaymentConsumer {
 public:
  PaymentConsumer(VoucherStore& store, AlertSink& alerts, const Clock& clock, const AmqpUrl& url,
                  const Topology& topology, ConsumerOptions options);
  ~PaymentConsumer();

  void Start();
  void Stop();  // finishes the batch in hand, then closes its connections

  const ConsumerStats& stats() const { return stats_; }

 private:
  void Run();
  absl::Status HandleBatch(AmqpConnection& in, AmqpConnection& out,
                           const std::vector<Delivery>& deliveries);

  VoucherStore& store_;
  AlertSink& alerts_;
  const Clock& clock_;
  const Topology topology_;
  const ConsumerOptions options_;
  AmqpSession consume_session_;
  AmqpSession reply_session_;
  ConsumerStats stats_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace outbox::accounting
