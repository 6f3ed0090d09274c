#pragma once

// Consumes the reply queue: each reply closes the outbox rows it
// acknowledges, one or many (SENT), FAILED ones too (the consumer booked
// them after all: their alerts resolve), and the rows it rejects (FAILED at
// once, with the consumer's reason). A batch of deliveries is marked in one transaction (the
// writer's next group), then acked with `multiple`. Replies that are
// unsigned or undecodable are dead-lettered at once. If the rows cannot be
// marked because the store cannot write (StoreUnavailable, dead_letter.h:
// a lock, a full disk, an I/O error), the deliveries not yet acked are
// kept and recorded again after a pause that doubles from 200 ms up to
// `store_retry_max` (counted in
// outbox_store_write_failures_total{write="record_acks"}); they are not
// sent back to the queue, where each return spends one of a message's
// deliveries (RabbitMQ 4.0 dead-letters a quorum queue's message after
// 20). Refused for any other reason, each reply is recorded alone and the
// one refused is dead-lettered with the error: a reply that can never be
// written does not hold the others. An exception from the decoder or the
// repository is such an error. What a reply means is the service's to
// say: it hands in a ReplyDecoder.
#include <atomic>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shared/base/clock.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/internal/store_backoff.h"
#include "shared/outbox/message_auth.h"
#include "shared/outbox/repository.h"
#include "shared/outbox/transport.h"
#include "shared/runtime/internal/worker_thread.h"

namespace outbox {

// What one reply acknowledges.
struct Acknowledgement {
  std::string message_id;  // the outbox message it closes
  std::string biz_key;     // the business key it was about (logged)
  bool duplicate = false;  // the consumer had seen the message before
  // The trace it continues, when the reply carries one per message (a
  // cumulative acknowledgement); "" = the reply's own traceparent header.
  std::string traceparent;
  // Not empty: a business reject. The consumer will never process the
  // message, and says why; the row is closed FAILED (kind "rejected") at
  // once and never re-published.
  std::string rejected_reason;
  // When the consumer made this answer (unix ms, read from the signed
  // reply; 0: the reply does not say). A reject made before the row was
  // last re-driven or repaired answers an earlier copy, and changes nothing
  // (OnReject): a late or replayed reject never fails a restarted row.
  int64_t answered_at = 0;
};

// Reads a reply (its type and body): what it acknowledges, one message or a
// consumer's cumulative acknowledgement of many. An error (INVALID_ARGUMENT)
// dead-letters the reply with its message as the reason.
using ReplyDecoder =
    std::function<absl::StatusOr<std::vector<Acknowledgement>>(const Delivery& reply)>;

struct AckListenerOptions {
  std::string queue;    // the reply queue, for logs and metrics; the consumer reads it
  int prefetch = 1024;  // most deliveries handled in one batch
  // Replies must be signed by one of these keys; null = unsigned accepted.
  const MessageKeys* keys = nullptr;
  // Most rows closed in one write transaction. A batch of cumulative
  // replies (up to `prefetch` of them, each closing up to 256 rows) is
  // recorded in chunks of whole replies, each acked once its rows are
  // written, so the write lock is never held for a quarter of a million
  // rows while creates and recovery's claims wait.
  int max_rows_per_commit = 4096;
  std::string biz_key_label = "biz_key";  // the log key of a reply's business key
  // The crash point evaluated before each write of acknowledgements
  // (shared/runtime/internal/failpoint.h); empty: none.
  std::string record_failpoint;
  // The longest pause before replies the store refused are recorded again.
  absl::Duration store_retry_max = absl::Seconds(5);
  const Clock* clock = nullptr;  // for the pause; null: the system clock
};

class AckListener {
 public:
  AckListener(MessageConsumer& acks, OutboxRepository& outbox, ReplyDecoder decode,
              MetricsRegistry& metrics, AckListenerOptions options);
  ~AckListener();

  void Start();
  void Stop();

  // One turn: connect if needed, take a batch and settle it. Returns false
  // once stopping. Tests call it directly.
  bool Step();

  int64_t acknowledged() const { return acknowledged_.value(); }
  int64_t replies() const { return replies_.value(); }
  int64_t late() const { return late_.value(); }
  int64_t harmless() const { return harmless_.value(); }
  int64_t rejected() const { return rejected_.value(); }
  int64_t dead_lettered() const { return dead_lettered_.value(); }
  int64_t unauthenticated() const { return unauthenticated_.value(); }

 private:
  // A reply and what it acknowledges.
  struct Decoded {
    const Delivery* delivery;
    std::vector<Acknowledgement> acks;
  };
  // Returns an error only for a broker failure.
  absl::Status HandleBatch(const std::vector<Delivery>& deliveries);
  // Records one chunk of replies. A store that cannot write sets `*held`
  // (what is not acked is held); another refusal has each reply recorded
  // alone and the one refused dead-lettered. `*acked_through` is the last
  // delivery acked; an error returned is the broker's.
  absl::Status RecordReplies(const std::vector<Decoded>& chunk, uint64_t* acked_through,
                             std::set<uint64_t>* dead_lettered, absl::Status* held);
  // Closes the rows of `chunk`, in transactions of at most
  // max_rows_per_commit rows, then acks through its last delivery. A write
  // the store refused sets `*refused` (nothing acked); an error returned is
  // the broker's.
  absl::Status RecordChunk(const std::vector<Decoded>& chunk, absl::Status* refused);
  // The store cannot write: the deliveries after `acked_through` that
  // were not dead-lettered wait for the next try (StoreBackoff).
  void BackOff(const std::vector<Delivery>& deliveries, uint64_t acked_through,
               const std::set<uint64_t>& dead_lettered, const absl::Status& why);
  // The waiting deliveries, with what arrived meanwhile, once the backoff
  // is over.
  absl::Status RetryWaiting();
  // max_rows_per_commit, at least 1.
  size_t MaxRowsPerCommit() const;

  MessageConsumer& acks_;
  OutboxRepository& outbox_;
  const ReplyDecoder decode_;
  const AckListenerOptions options_;
  Counter& replies_;       // reply messages received (each acknowledges one or more)
  Counter& acknowledged_;  // rows turned SENT
  Counter& late_;          // of which FAILED before: delivered after all
  Counter& harmless_;      // replies for unknown or already closed rows
  Counter& rejected_;      // rows closed FAILED by a business reject
  Counter& dead_lettered_;
  Counter& unauthenticated_;  // of those, missing or bad signatures
  Counter& record_failures_;  // writes the store could not make (held)
  // Each row it closed SENT: the commit to the reply applied, whatever the store.
  DurationHistogram& create_to_sent_;
  const Clock& clock_;
  // Owned by the listener's thread: deliveries the store refused, unacked,
  // recorded again when the backoff is over.
  std::vector<Delivery> waiting_;
  StoreBackoff backoff_;
  WorkerThread thread_;
};

}  // namespace outbox
