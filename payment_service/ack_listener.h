#pragma once

// Consumes ACC_QUEUE: each PaymentAccounted closes its outbox row (SENT),
// a FAILED one too (the voucher is booked: its alert resolves). A
// batch of deliveries is marked in one transaction (the writer's next group),
// then acked with `multiple`. Undecodable messages are dead-lettered at once;
// if the rows cannot be marked, the deliveries go back to the queue.
#include <atomic>
#include <string>
#include <vector>

#include "shared/observability/metrics.h"
#include "shared/outbox/repository.h"
#include "shared/outbox/transport.h"
#include "shared/outbox/message_auth.h"
#include "shared/runtime/worker_thread.h"

namespace outbox::payment {

struct AckListenerOptions {
  std::string queue = "ACC_QUEUE";  // for logs and metrics; the consumer reads it
  int prefetch = 1024;              // most deliveries handled in one batch
  // Replies must be signed by one of these keys; null = unsigned accepted.
  const MessageKeys* keys = nullptr;
};

class AckListener {
 public:
  AckListener(MessageConsumer& acks, OutboxRepository& outbox, MetricsRegistry& metrics,
              AckListenerOptions options);
  ~AckListener();

  void Start();
  void Stop();

  // One turn: connect if needed, take a batch and settle it. Returns false
  // once stopping. Tests call it directly.
  bool Step();

  int64_t acknowledged() const { return acknowledged_.value(); }
  int64_t late() const { return late_.value(); }
  int64_t harmless() const { return harmless_.value(); }
  int64_t dead_lettered() const { return dead_lettered_.value(); }
  int64_t unauthenticated() const { return unauthenticated_.value(); }

 private:
  // Returns an error only for a broker failure.
  absl::Status HandleBatch(const std::vector<Delivery>& deliveries);

  MessageConsumer& acks_;
  OutboxRepository& outbox_;
  const AckListenerOptions options_;
  Counter& acknowledged_;  // rows turned SENT
  Counter& late_;          // of which FAILED before: delivered after all
  Counter& harmless_;      // replies for unknown or already closed rows
  Counter& dead_lettered_;
  Counter& unauthenticated_;  // of those, missing or bad signatures
  WorkerThread thread_;
};

}  // namespace outbox::payment
