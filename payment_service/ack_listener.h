#pragma once

// Consumes ACC_QUEUE: each PaymentAccounted marks its outbox row SENT. A batch
// of deliveries is marked in one transaction (the writer's next group), then
// acked with `multiple`. Undecodable messages are dead-lettered at once.
#include <atomic>
#include <thread>

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "shared/alerts.h"
#include "shared/amqp_session.h"

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
  // Marks rows SENT durably; returns how many changed.
  using MarkSentFn = std::function<absl::StatusOr<int>(const std::vector<std::string>&)>;

  AckListener(MarkSentFn mark_sent, AlertSink& alerts, AmqpUrl url, Topology topology,
              AckListenerOptions options);
  ~AckListener();

  void Start();
  void Stop();

  const AckListenerStats& stats() const { return stats_; }
  bool connected() const { return connected_.load(); }

 private:
  void Run();
  // Handles one batch; returns an error only for a broker failure.
  absl::Status HandleBatch(AmqpConnection& conn, const std::vector<Delivery>& deliveries);

  const MarkSentFn mark_sent_;
  AlertSink& alerts_;
  AmqpSession session_;
  const AckListenerOptions options_;
  AckListenerStats stats_;
  std::atomic<bool> connected_{false};
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace outbox::payment
