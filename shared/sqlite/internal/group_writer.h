#pragma once

// Group commit on a producer's SQLite file. Writes from many threads (each
// the adopter's rows and one outbox row) and the acknowledgements of an
// AckListener are queued; one writer thread commits what is queued in ONE
// transaction (one fsync), each write under a savepoint of its own so that
// one failing write fails alone. Right after the commit the group's messages
// go to the relay (RelayQueue::Enqueue, with the group's time stamp), then
// each caller hears its own outcome through its completion.
//
// It is the AckListener's OutboxRepository: acknowledgements ride the same
// group commit (a batch of acks with no write queued waits up to
// `ack_linger` for one). Rejects, failure notes and reads go straight to the
// SqliteOutbox underneath, which is also the relay's repository.
//
//   SqliteOutbox outbox(file, clock, retry);
//   Relay relay(publisher, outbox, clock, metrics, relay_options);
//   GroupWriter writer(file, outbox, relay, clock, metrics, GroupWriterOptions{});
//   AckListener acks(replies, writer, decode, metrics, ack_options);
//   writer.Start();
//   writer.WriteAsync(spec, write_my_rows, [](absl::StatusOr<OutboxMessage> row) { ... });
//
// outbox::Producer (shared/roles/producer.h) wires exactly that.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shared/base/clock.h"
#include "shared/base/internal/mutex.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/internal/state_machine.h"
#include "shared/outbox/internal/write_queue.h"
#include "shared/outbox/message.h"
#include "shared/outbox/repository.h"
#include "shared/sqlite/internal/sqlite_outbox.h"
#include "shared/sqlite/sqlite_file.h"

namespace outbox {

// The business part of one write: the adopter's own rows, written on `db`
// (the file's writer connection) before the write's outbox row.
//
// It runs on the writer thread, inside the group's transaction, under a
// savepoint of the write's own. An error it returns, or an exception it
// throws (a SQLite::Exception becomes a status as SqliteError says; any
// other std::exception INTERNAL), rolls back to that savepoint: this write
// fails alone, with that error, and the rest of the group commits. So it
//  - writes only through `db`, and leaves no statement of its own mid-step;
//  - never begins, commits or rolls back a transaction, nor touches
//    savepoints it did not make;
//  - may run more than once: when SQLITE_BUSY starts the group's
//    transaction over (WriteTransaction, sqlite_file.h) every write of the
//    group runs again. What it learns reaches the caller's state only in
//    the completion;
//  - is short: the whole group, and every caller in it, waits behind it;
//  - never calls the writer (Write, WriteAsync, RecordAcks) nor waits for
//    something that does: it runs on the writer's thread.
using BusinessWrite = std::function<absl::Status(SQLite::Database& db)>;

struct GroupWriterOptions {
  size_t max_batch = 512;  // most writes committed in one transaction
  // Acknowledgements that find no write queued wait up to this long for one
  // to share their commit: at low rates one fsync serves both instead of
  // one each. Under load writes are always queued and nothing waits. Zero:
  // acknowledgements commit at once.
  absl::Duration ack_linger = absl::Milliseconds(5);
  // Backpressure: while the consumer replies (acknowledgements came in the
  // last second) but at least this many rows are SENDING, new writes wait
  // up to `max_hold` before their group (acknowledgements meanwhile commit
  // at once), so a closed loop of callers cannot outrun the consumer and
  // grow the backlog without bound. 0: off. In a consumer or broker outage
  // no acknowledgements flow and nothing is held.
  int64_t max_unsent = 512;
  // The longest a write waits for the backlog (max_unsent) to shrink.
  absl::Duration max_hold = absl::Milliseconds(20);
  // A crash point (shared/runtime/internal/failpoint.h) evaluated once a group is
  // written, before its commit; empty: none.
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

class GroupWriter final : public OutboxRepository {
 public:
  // `file` holds the outbox tables; `outbox`, on the same file, stamps its
  // retry policy on each row and takes what needs no group (rejects,
  // failure notes, reads); `relay` takes each group's messages once
  // committed. All three outlive this. The writer thread runs from Start().
  GroupWriter(SqliteFile& file, SqliteOutbox& outbox, RelayQueue& relay, const Clock& clock,
              MetricsRegistry& metrics, GroupWriterOptions options);
  ~GroupWriter() override;  // Stop()

  void Start();
  // Commits everything queued (writes and acknowledgements, on the calling
  // thread if Start never ran), then stops; later calls are refused
  // (UNAVAILABLE).
  void Stop();

  // Runs once, with the committed row (its message_id, id and times) or
  // the write's error: on the writer thread right after its group's commit
  // (keep it short: the callers after it in the group wait), or at once on
  // the caller's thread when the writer is stopping (UNAVAILABLE).
  using WriteDone = absl::AnyInvocable<void(absl::StatusOr<OutboxMessage>) &&>;
  // Queues `business` and the outbox row of `spec` (NewOutboxMessage at the
  // group's time) and returns at once. If the group's transaction fails
  // (a full disk, a damaged file, a lock held past the busy timeout), every
  // write of the group gets its error.
  void WriteAsync(MessageSpec spec, BusinessWrite business, WriteDone done);
  // The same, waiting for the outcome.
  absl::StatusOr<OutboxMessage> Write(MessageSpec spec, BusinessWrite business);

  // OutboxRepository. Blocks until the rows are marked in a group.
  absl::StatusOr<AckTally> RecordAcks(const std::vector<std::string>& message_ids) override;
  // The SqliteOutbox's, each its own short transaction.
  absl::StatusOr<int> RecordRejects(const std::vector<Rejection>& rejects) override {
    return outbox_.RecordRejects(rejects);
  }
  absl::Status RecordPublishFailure(const std::vector<std::string>& message_ids,
                                    const std::string& error) override {
    return outbox_.RecordPublishFailure(message_ids, error);
  }
  absl::StatusOr<std::vector<std::string>> TakenOver(
      const std::vector<std::string>& message_ids) override {
    return outbox_.TakenOver(message_ids);
  }

  int64_t groups_committed() const { return groups_.value(); }  // transactions
  int64_t written() const { return written_.value(); }          // messages committed
  int64_t holds() const { return holds_.value(); }
  int64_t ack_lingers() const { return ack_lingers_.value(); }

 private:
  struct Pending {
    MessageSpec spec;
    BusinessWrite business;
    WriteDone done;
  };
  struct PendingAcks {
    const std::vector<std::string>* message_ids;
    absl::StatusOr<AckTally> tally;
    bool done = false;
  };
  struct Statements;  // group_writer.cc

  void Run();
  // One group: its writes and acknowledgements in one transaction, the
  // messages to the relay, then the ack batches and the callers answered.
  void CommitGroup(std::vector<Pending>& group, std::vector<PendingAcks*>& acks)
      ABSL_LOCKS_EXCLUDED(writes_.mu());
  // The transaction: each write's outcome (or the transaction's error for
  // all), and the acknowledgements' tally in `tally`.
  std::vector<absl::StatusOr<OutboxMessage>> Commit(std::vector<Pending>& group,
                                                    const std::vector<OutboxMessage>& rows,
                                                    const std::vector<std::string>& ack_ids,
                                                    int64_t now, absl::StatusOr<AckTally>& tally);
  // Hands each ack batch its part of the commit's tally (or its error).
  void AnswerAcks(const absl::StatusOr<AckTally>& tally, const std::vector<PendingAcks*>& acks)
      ABSL_LOCKS_EXCLUDED(writes_.mu());
  absl::StatusOr<int64_t> CountSending(int64_t limit);

  SqliteFile& file_;
  SqliteOutbox& outbox_;
  RelayQueue& relay_;
  const Clock& clock_;
  const GroupWriterOptions options_;
  // Prepared once on the writer connection, used only inside
  // SqliteFile::WithWriter by the writer thread (or by Stop when the thread
  // never ran).
  std::unique_ptr<Statements> statements_;

  WriteQueue<Pending> writes_{[this] { Run(); }};
  std::vector<PendingAcks*> acks_ ABSL_GUARDED_BY(writes_.mu());
  Counter& groups_;
  Counter& written_;
  Counter& holds_;
  Counter& ack_lingers_;      // acknowledgements that waited for a write to share their commit
  Counter& commit_failures_;  // group transactions the file refused (full, damaged)
  // The backpressure (max_unsent, max_hold) and when acknowledgements last
  // committed: the writer thread's.
  WriteHold hold_;
  int64_t last_ack_ms_ = WriteHold::kNoAck;
};

}  // namespace outbox
