#pragma once

// Consumes ACC_QUEUE: each PaymentAccounted marks its outbox row SENT. A batch
// of deliveries is marked in one transaction, then acked with `multiple`.
// Undecodable messages are dead-lettered at once.
#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "payment_service/payment_store.h"
#include "shared/alerts.h"
#include "shared/amqp_session.h"
#include "shared/clock.h"

namespace outbox::payment {

struct AckListenerOptions {
  int prefetch = 256;
};

struct AckListenerStats {
  std::atomic<int64_t> acknowledged{0};  // rows turned SENT
  std::atomic<int64_t> harmless{0};      // replies for unknown or already SENT rows
  std::atomic<int64_t> dead_lettered{0};
};

class AckListener {
 public:
  AckListener(PaymentStore& store, AlertSink& alerts, const Clock& clock, AmqpUrl url,
              Topology topology, AckListenerOptions options);
  ~AckListener();

  void Start();
  void Stop();

  const AckListenerStats& stats() const { return stats_; }
  bool connected() const { return connected_.load(); }

 private:
  void Run();
  // Handles one batch; returns an error only for a broker failure.
  absl::Status HandleBatch(AmqpConnection& conn, const std::vector<Delivery>& deliveries);

  PaymentStore& store_;
  AlertSink& alerts_;
  const Clock& clock_;
  AmqpSession session_;
  const AckListenerOptions options_;
  AckListenerStats stats_;
  std::atomic<bool> connected_{false};
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace outbox::payment
