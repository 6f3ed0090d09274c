#pragma once

// Group commit on PostgreSQL, the counterpart of GroupWriter
// (shared/sqlite/internal/group_writer.h): writes from many threads (each
// the adopter's rows and one outbox row) are queued; one writer thread
// commits up to `max_batch` of them in ONE transaction on a PgSession, each
// write's business step under a savepoint of its own so that one failing
// write fails alone. Right after the commit the group's messages go to the
// relay (RelayQueue::Enqueue, with the group's time stamp), then each caller
// hears its own outcome through its completion.
//
//   PgOutbox outbox(session, clock, retry);     // the relay's repository
//   Relay relay(publisher, outbox, clock, metrics, relay_options);
//   PgGroupWriter writer(session, outbox, relay, clock, metrics, PgGroupWriterOptions{});
//   writer.Start();
//   writer.WriteAsync(spec, write_my_rows, [](absl::StatusOr<OutboxMessage> row) { ... });
//
// The group's outbox rows travel as ONE statement (INSERT ... SELECT FROM
// unnest of one array per column): on PostgreSQL a statement per row costs
// about ten times the server's CPU of one per table (docs/performance.md,
// "PostgreSQL's floor"). A write whose row would break the table's
// uniqueness (its message id, or its business type and key) must still fail
// alone with ALREADY_EXISTS and leave no business rows behind, so:
//  - before the business steps run, one SELECT looks for the group's message
//    ids and business keys in the table; a write repeating one of them, or
//    one of an earlier write of the group that succeeded, fails
//    ALREADY_EXISTS before its business step runs;
//  - the rest run their business steps, each under its savepoint, and the
//    survivors' rows go in with the one INSERT;
//  - should that INSERT still meet a unique violation (another writer, not
//    this one, committed the same id or key between the SELECT and the
//    INSERT), the transaction is rolled back and the group is written again
//    the plain way: each write's business step and its own row INSERT under
//    its savepoint, exactly PgOutbox::Write's semantics per write.
// A business step may therefore run more than once (as it may when
// PgSession runs a transaction again after a serialization failure).
// Each write still costs two round trips on the writer's connection (its
// savepoint, released with the next one's, and its business step), which
// bounds the groups per second; docs/performance.md has the figures.
//
// Backpressure (max_unsent, max_hold) is GroupWriter's (WriteHold,
// write_queue.h). The SENDING rows are counted database-wide, on the
// writer's session: replicas on one database share the consumer's backlog.
// Acknowledgements do not ride the group commit (no ack_linger): the ack
// listener applies them in transactions of its own (PgOutbox, through
// PgAckRepository below), and each batch applied tells the writer
// (AcksApplied) that the consumer replies, and wakes a held group to count
// the backlog again.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shared/base/clock.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/internal/state_machine.h"
#include "shared/outbox/internal/write_queue.h"
#include "shared/outbox/message.h"
#include "shared/outbox/repository.h"
#include "shared/postgres/internal/pg_outbox.h"
#include "shared/postgres/pg_connection.h"
#include "shared/postgres/pg_session.h"
#include "shared/sqlite/internal/group_writer.h"

namespace outbox {

// The business part of one write: the adopter's own rows, written on `conn`
// before the write's outbox row. It runs on the writer thread, inside the
// group's transaction, under a savepoint of the write's own: an error it
// returns rolls back to that savepoint and this write fails alone with it,
// unless the link is gone (then the whole group fails UNAVAILABLE). So it
// never begins, commits or rolls back a transaction nor touches savepoints
// it did not make; it may run more than once (see above); it is short (the
// whole group waits behind it); and it never calls the writer.
using PgBusinessWrite = std::function<absl::Status(PgConnection& conn)>;

struct PgGroupWriterOptions {
  // Most writes committed in one transaction. Each write's savepoint is a
  // subtransaction of the group's; past 64 of them (PGPROC_MAX_CACHED_SUBXIDS)
  // the server's snapshots of every session must look them up in
  // pg_subtrans while the group runs, hence 64 (GroupWriter's is 512).
  size_t max_batch = 64;
  // Backpressure, GroupWriterOptions' with its defaults: while the consumer
  // replies (acknowledgements applied in the last second) but at least this
  // many rows are SENDING in the database, new writes wait up to `max_hold`
  // before their group. 0: off. In a consumer or broker outage no
  // acknowledgements flow and nothing is held.
  int64_t max_unsent = GroupWriterOptions{}.max_unsent;
  // The longest a write waits for the backlog (max_unsent) to shrink.
  absl::Duration max_hold = GroupWriterOptions{}.max_hold;
  // A crash point (shared/runtime/internal/failpoint.h) evaluated once a
  // group is written, before its commit; empty: none.
  std::string before_commit_failpoint;
  // One evaluated once a group is committed, before its messages go to the
  // relay; empty: none.
  std::string after_commit_failpoint;
  // The name of the counter of messages committed (a service names its own).
  std::string written_metric = "outbox_messages_written_total";
  std::string written_help = "messages committed with their business rows";  // its help text

  // INVALID_ARGUMENT naming the option.
  absl::Status Validate() const;
};

class PgGroupWriter {
 public:
  // `session` reaches the outbox tables and is the writer's alone while a
  // group commits (other callers of it wait their turn); `outbox` stamps its
  // retry policy on each row; `relay` takes each group's messages once
  // committed. All outlive this. The writer thread runs from Start().
  PgGroupWriter(PgSession& session, const PgOutbox& outbox, RelayQueue& relay, const Clock& clock,
                MetricsRegistry& metrics, PgGroupWriterOptions options);
  ~PgGroupWriter();  // Stop()

  void Start();
  // Commits everything queued (on the calling thread if Start never ran),
  // then stops; later writes are refused (UNAVAILABLE).
  void Stop();

  // Runs once, with the committed row (its message_id, id and times) or the
  // write's error: on the writer thread right after its group's commit
  // (keep it short), or at once on the caller's thread when the writer is
  // stopping (UNAVAILABLE).
  using WriteDone = absl::AnyInvocable<void(absl::StatusOr<OutboxMessage>) &&>;
  // Queues `business` and the outbox row of `spec` (NewOutboxMessage at the
  // group's time) and returns at once. ALREADY_EXISTS when the message id or
  // the business key is taken. If the group's transaction fails (the link
  // lost: UNAVAILABLE, nothing of the group written; a COMMIT cut off may
  // have committed or not, as PgSession says), every write of the group gets
  // that error; PgSession connects again for the next group.
  void WriteAsync(MessageSpec spec, PgBusinessWrite business, WriteDone done);
  // The same, waiting for the outcome.
  absl::StatusOr<OutboxMessage> Write(MessageSpec spec, PgBusinessWrite business);

  // The ack path's word that a batch of acknowledgements was applied (its
  // transaction committed): the consumer replies. A group held for the
  // backlog wakes and counts it again. Any thread; PgAckRepository calls it.
  void AcksApplied();

  int64_t groups_committed() const { return groups_.value(); }  // transactions
  int64_t written() const { return written_.value(); }          // messages committed
  int64_t holds() const { return holds_.value(); }              // groups of new writes held back
  // Groups written again one INSERT per row (a unique violation the first
  // check could not see).
  int64_t rewrites() const { return rewrites_.load(); }

 private:
  struct Pending {
    MessageSpec spec;
    PgBusinessWrite business;
    WriteDone done;
  };

  void Run();
  void CommitGroup(std::vector<Pending>& group);
  absl::StatusOr<int64_t> CountSending(int64_t limit);
  // The transaction: each write's outcome, or the transaction's error for all.
  std::vector<absl::StatusOr<OutboxMessage>> Commit(std::vector<Pending>& group,
                                                    const std::vector<OutboxMessage>& rows);

  PgSession& session_;
  const PgOutbox& outbox_;
  RelayQueue& relay_;
  const Clock& clock_;
  const PgGroupWriterOptions options_;

  WriteQueue<Pending> writes_{[this] { Run(); }};
  Counter& groups_;
  Counter& written_;
  Counter& holds_;
  Counter& commit_failures_;
  std::atomic<int64_t> rewrites_{0};
  WriteHold hold_;  // the writer thread's
  // Batches of acknowledgements applied, and when the last one was.
  int64_t acks_applied_ ABSL_GUARDED_BY(writes_.mu()) = 0;
  int64_t last_ack_ms_ ABSL_GUARDED_BY(writes_.mu()) = WriteHold::kNoAck;
};

// The ack listener's repository on PostgreSQL: `acks` (a PgOutbox on a
// session of its own) does the work; each batch of acknowledgements it
// applies is told to `writer` (AcksApplied) for its backpressure. Both
// outlive this.
class PgAckRepository final : public OutboxRepository {
 public:
  PgAckRepository(OutboxRepository& acks, PgGroupWriter& writer) : acks_(acks), writer_(writer) {}

  absl::StatusOr<AckTally> RecordAcks(const std::vector<std::string>& message_ids) override {
    absl::StatusOr<AckTally> tally = acks_.RecordAcks(message_ids);
    if (tally.ok()) writer_.AcksApplied();
    return tally;
  }
  absl::StatusOr<int> RecordRejects(const std::vector<Rejection>& rejects) override {
    return acks_.RecordRejects(rejects);
  }
  absl::Status RecordPublishFailure(const std::vector<std::string>& message_ids,
                                    const std::string& error) override {
    return acks_.RecordPublishFailure(message_ids, error);
  }
  absl::StatusOr<std::vector<std::string>> TakenOver(
      const std::vector<std::string>& message_ids) override {
    return acks_.TakenOver(message_ids);
  }

 private:
  OutboxRepository& acks_;
  PgGroupWriter& writer_;
};

}  // namespace outbox
