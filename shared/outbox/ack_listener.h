#pragma once

// Consumes the reply queue: each reply closes the outbox rows it
// acknowledges, one or many (SENT), FAILED ones too (the consumer booked
// them after all: their alerts resolve), and the rows it rejects (FAILED at
// once, with the consumer's reason). A batch of deliveries is marked in one transaction (the
// writer's next group), then acked with `multiple`. Replies that are
// unsigned or undecodable are dead-lettered at once; if the rows cannot be
// marked, the deliveries go back to the queue. What a reply means is the
// service's to say: it hands in a ReplyDecoder.
#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/message_auth.h"
#include "shared/outbox/repository.h"
#include "shared/outbox/transport.h"
#include "shared/runtime/worker_thread.h"

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
  // (shared/runtime/failpoint.h); empty: none.
  std::string record_failpoint;
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
  // Returns an error only for a broker failure.
  absl::Status HandleBatch(const std::vector<Delivery>& deliveries);
  // Closes the rows of one chunk of valid replies, in transactions of at
  // most max_rows_per_commit rows, then acks up to `last_tag`; on a write
  // failure requeues from there on instead.
  absl::Status RecordChunk(const std::vector<std::string>& message_ids,
                           const std::vector<Rejection>& rejects, uint64_t last_tag);
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
  WorkerThread thread_;
};

}  // namespace outbox
