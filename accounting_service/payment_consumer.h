#pragma once

// Consumes PAY_QUEUE in batches: decode, apply the batch in one transaction,
// answer every message (new or duplicate) on its reply_to with confirms, and
// ack each delivery only once the reply answering it is confirmed
// (`multiple` over the settled prefix). Messages whose publisher accepts
// batch replies are answered together, one PaymentsAccounted per reply
// queue; the others get a PaymentAccounted each. The replies' confirms are a sliding window
// (ConfirmWindow): the next batch is taken and booked while the previous
// one's confirms are on their way. A message that cannot be decoded or
// validated, or whose reply cannot be routed, is dead-lettered; anything
// else that fails goes back to the queue.
#include <atomic>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "accounting_service/voucher_store.h"
#include "shared/base/clock.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/confirm_window.h"
#include "shared/outbox/message_auth.h"
#include "shared/outbox/transport.h"
#include "shared/runtime/worker_thread.h"

namespace outbox::accounting {

struct ConsumerOptions {
  std::string pay_queue = "PAY_QUEUE";  // for logs and metrics; `payments` reads it
  std::string acc_queue = "ACC_QUEUE";  // replies for messages without reply_to
  int prefetch = 256;
  absl::Duration confirm_timeout = absl::Seconds(5);
  int64_t max_amount_minor = kDefaultMaxAmountMinor;  // larger amounts are dead-lettered
  // Events must be signed by one of these keys; null = unsigned accepted.
  // (Replies are signed by the publisher given, a SigningPublisher.)
  const MessageKeys* keys = nullptr;
};

class PaymentConsumer {
 public:
  PaymentConsumer(MessageConsumer& payments, MessagePublisher& replies, VoucherLedger& ledger,
                  const Clock& clock, MetricsRegistry& metrics, ConsumerOptions options);
  ~PaymentConsumer();

  void Start();
  void Stop();  // finishes the batch in hand and waits for its replies' confirms, then stops

  // One turn: connect both sides if needed, take a batch and settle it.
  // False once stopping. Tests call it directly.
  bool Step();

  int64_t applied() const { return applied_.value(); }
  int64_t duplicates() const { return duplicates_.value(); }
  int64_t dead_lettered() const { return dead_lettered_.value(); }
  int64_t unauthenticated() const { return unauthenticated_.value(); }
  int64_t requeued() const { return requeued_.value(); }

 private:
  // A reply to publish and the deliveries it answers.
  struct Reply {
    OutgoingMessage message;
    std::vector<const Delivery*> answers;
  };

  // The deliveries of one batch that passed every check, in order.
  struct Admitted {
    std::vector<PaymentEvent> events;
    std::vector<const Delivery*> sources;  // events[i] came in sources[i]
    uint64_t last_tag = 0;                 // the last admitted (rejected tags are settled already)
  };

  absl::Status HandleBatch(const std::vector<Delivery>& deliveries);
  // Checks each delivery's signature, body and reply queue; what fails is
  // dead-lettered, the rest admitted. An error only from the broker.
  absl::Status Admit(const std::vector<Delivery>& deliveries, Admitted* batch);
  // The batch could not be booked: it goes back to the queue, with the
  // earlier deliveries still waiting for their replies' confirms.
  absl::Status RequeueBatch(const Admitted& batch, const absl::Status& why);
  // Publishes the replies into the confirm window; their deliveries wait.
  absl::Status PublishReplies(const std::vector<Reply>& replies);
  // The replies to a booked batch (and its counters and logs).
  std::vector<Reply> Answer(const std::vector<PaymentEvent>& events,
                            const std::vector<const Delivery*>& sources,
                            const std::vector<ApplyOutcome>& outcomes);
  // Its deliveries wait for its confirm.
  void Track(const Reply& reply);
  // NOT_FOUND when `queue` (a reply_to) does not exist: the message is poison
  // and is dead-lettered before anything is booked. Queues seen to exist are
  // remembered; any other answer lets the message through (a reply that
  // cannot be routed is still caught when it is published).
  absl::Status CheckReplyQueue(const std::string& queue);
  // Reads the confirms that came (waiting up to `wait`), then acks, requeues
  // or dead-letters the deliveries whose replies are all answered, in order.
  absl::Status Settle(absl::Duration wait);
  absl::Status SettleAnswered();
  // The reply connection failed: no confirm will come, so every delivery
  // still waiting goes back to the queue (replied to again as a duplicate).
  absl::Status FailReplies(const absl::Status& why);
  // The delivery connection is gone: the broker requeues what was unacked.
  void ForgetUnsettled();

  // A booked delivery whose reply is published and not yet settled.
  struct Unsettled {
    Delivery delivery;
    std::string reply_queue;
    enum class State { kWaiting, kConfirmed, kUnroutable, kNotConfirmed } state = State::kWaiting;
  };

  MessageConsumer& payments_;
  MessagePublisher& replies_;
  VoucherLedger& ledger_;
  const Clock& clock_;
  const ConsumerOptions options_;
  Counter& applied_;     // vouchers created
  Counter& duplicates_;  // messages seen before, replied to again
  Counter& dead_lettered_;
  Counter& unauthenticated_;  // of those, missing or bad signatures
  Counter& requeued_;
  Counter& apply_failures_;  // batch transactions the file refused (full, damaged)
  std::set<std::string> known_reply_queues_;
  // Owned by the consumer thread: by delivery tag, and reply tag -> the
  // delivery tags it answers.
  std::map<uint64_t, Unsettled> unsettled_;
  ConfirmWindow<std::vector<uint64_t>> window_;
  WorkerThread thread_;
};

}  // namespace outbox::accounting
