#include "shared/sqlite/internal/group_writer.h"

#include <sqlite3.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/runtime/internal/failpoint.h"
#include "shared/sqlite/outbox_table.h"

namespace outbox {

// The group's statements, prepared once on the writer connection and
// reused by every group.
struct GroupWriter::Statements {
  explicit Statements(SQLite::Database& db)
      : outbox(db),
        savepoint(db, "SAVEPOINT outbox_group_write"),
        release(db, "RELEASE outbox_group_write"),
        rollback_to(db, "ROLLBACK TO outbox_group_write"),
        acks(db) {}

  // A statement an exception left mid-step is reset before it is used
  // again, and none stays mid-step past the transaction: it would hold the
  // writer's read snapshot, which goes stale once another process commits.
  void Reset() {
    for (SQLite::Statement* s : {&savepoint, &release, &rollback_to}) s->tryReset();
  }

  OutboxInserter outbox;
  SQLite::Statement savepoint;
  SQLite::Statement release;
  SQLite::Statement rollback_to;
  OutboxStateTable acks;
};

namespace {

void Run(SQLite::Statement& s) {
  s.exec();
  s.reset();
}

// The next ack batch's share of what is `left` of the group's tally, taken off it.
AckTally TakeShare(AckTally& left, int room) {
  AckTally mine;
  mine.closed = std::min(left.closed, room);
  mine.late = std::min(left.late, room - mine.closed);
  left.closed -= mine.closed;
  left.late -= mine.late;
  // The latencies of the rows this batch turned SENT, in the same order.
  const auto taken = left.create_to_sent_ms.begin() +
                     std::min<size_t>(mine.changed(), left.create_to_sent_ms.size());
  mine.create_to_sent_ms.assign(left.create_to_sent_ms.begin(), taken);
  left.create_to_sent_ms.erase(left.create_to_sent_ms.begin(), taken);
  return mine;
}

// The business rows and the outbox row of one write, under its savepoint:
// a failure rolls back this write's rows only. `row.id` is set when written.
absl::Status WriteOne(SQLite::Statement& savepoint, SQLite::Statement& release,
                      SQLite::Statement& rollback_to, OutboxInserter& inserter,
                      SQLite::Database& db, const BusinessWrite& business, OutboxMessage& row) {
  Run(savepoint);
  absl::Status status;
  try {
    status = business(db);
    if (status.ok()) row.id = inserter.Insert(row);
  } catch (const SQLite::Exception& e) {
    status = SqliteError(e, "write transaction");
  } catch (const std::exception& e) {
    status = absl::InternalError(absl::StrCat("write transaction: ", e.what()));
  }
  if (status.ok()) {
    Run(release);
    return status;
  }
  // SQLite itself rolled the whole transaction back (a full disk, an I/O
  // error): there is no savepoint left, and the group fails with this error.
  if (sqlite3_get_autocommit(db.getHandle()) != 0) return status;
  Run(rollback_to);
  Run(release);
  return status;
}

}  // namespace

absl::Status GroupWriterOptions::Validate() const {
  if (max_batch < 1) return absl::InvalidArgumentError("max_batch must be >= 1");
  if (max_unsent < 0) return absl::InvalidArgumentError("max_unsent must be >= 0 (0: off)");
  if (max_hold < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("max_hold must not be negative");
  }
  if (ack_linger < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("ack_linger must not be negative");
  }
  if (written_metric.empty()) return absl::InvalidArgumentError("written_metric is required");
  return absl::OkStatus();
}

GroupWriter::GroupWriter(SqliteFile& file, SqliteOutbox& outbox, RelayQueue& relay,
                         const Clock& clock, MetricsRegistry& metrics, GroupWriterOptions options)
    : file_(file),
      outbox_(outbox),
      relay_(relay),
      clock_(clock),
      options_(std::move(options)),
      groups_(metrics.AddCounter("outbox_group_commits_total",
                                 "write transactions (groups of writes and acknowledgements)")),
      written_(metrics.AddCounter(options_.written_metric, options_.written_help)),
      holds_(metrics.AddCounter("outbox_writer_holds_total",
                                "groups of new writes held back while the consumer lagged")),
      ack_lingers_(metrics.AddCounter(
          "outbox_writer_ack_lingers_total",
          "acknowledgements that waited (up to ack_linger) for a write to share their commit")),
      commit_failures_(StoreWriteFailures(metrics, "commit_group")),
      hold_(options_.max_unsent, options_.max_hold, clock_,
            [this](int64_t limit) { return CountSending(limit); }) {}

GroupWriter::~GroupWriter() {
  Stop();
}

void GroupWriter::Start() {
  writes_.Start();
}

void GroupWriter::Stop() {
  writes_.Stop();
}

void GroupWriter::WriteAsync(MessageSpec spec, BusinessWrite business, WriteDone done) {
  writes_.Push({std::move(spec), std::move(business), std::move(done)});
}

absl::StatusOr<OutboxMessage> GroupWriter::Write(MessageSpec spec, BusinessWrite business) {
  return writes_.PushAndWait({std::move(spec), std::move(business), nullptr});
}

absl::StatusOr<AckTally> GroupWriter::RecordAcks(const std::vector<std::string>& message_ids) {
  PendingAcks pending{&message_ids, AckTally{}, false};
  MutexLock lock(&writes_.mu());
  if (writes_.stopping()) return WriterStopping();
  acks_.push_back(&pending);
  writes_.mu().Await(absl::Condition(&pending.done));
  return pending.tally;
}

void GroupWriter::Run() {
  while (true) {
    std::vector<Pending> group;
    std::vector<PendingAcks*> acks;
    {
      MutexLock lock(&writes_.mu());
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(writes_.mu()) {
        return !writes_.empty() || !acks_.empty() || writes_.stopping();
      };
      writes_.mu().Await(absl::Condition(&ready));
      if (writes_.empty() && acks_.empty()) return;  // stopping and drained
      if (writes_.empty() && !writes_.stopping() && options_.ack_linger > absl::ZeroDuration()) {
        // Only acknowledgements: give new writes a moment to share the commit.
        auto write_or_stop = [this]() ABSL_SHARED_LOCKS_REQUIRED(writes_.mu()) {
          return !writes_.empty() || writes_.stopping();
        };
        ack_lingers_.Add();
        writes_.mu().AwaitWithTimeout(absl::Condition(&write_or_stop), options_.ack_linger);
      }
      bool hold = acks_.empty() && !writes_.stopping() && clock_.Now() < hold_.until();
      if (hold) {
        // The consumer lags: acks go first (each lowers the backlog); new
        // writes wait for one, or for the end of the hold.
        holds_.Add();
        auto ack_or_stop = [this]() ABSL_SHARED_LOCKS_REQUIRED(writes_.mu()) {
          return !acks_.empty() || writes_.stopping();
        };
        writes_.mu().AwaitWithTimeout(absl::Condition(&ack_or_stop), hold_.until() - clock_.Now());
        hold = !acks_.empty() && !writes_.stopping();  // commit those acks alone first
      }
      if (!hold) writes_.Take(options_.max_batch, group);
      acks.swap(acks_);
    }
    const bool wrote = !group.empty();
    CommitGroup(group, acks);
    if (!acks.empty()) last_ack_ms_ = clock_.NowMillis();
    hold_.After(wrote, last_ack_ms_);
  }
}

absl::StatusOr<int64_t> GroupWriter::CountSending(int64_t limit) {
  int64_t count = 0;
  RETURN_IF_ERROR(file_.Read("count sending", [&](SQLite::Database& reader) {
    // The count stops at `limit`, so it stays cheap in an outage.
    SQLite::Statement stmt(
        reader, "SELECT count(*) FROM (SELECT 1 FROM outbox WHERE status = 'SENDING' LIMIT ?)");
    stmt.bind(1, limit);
    if (stmt.executeStep()) count = stmt.getColumn(0).getInt64();
    return absl::OkStatus();
  }));
  return count;
}

std::vector<absl::StatusOr<OutboxMessage>> GroupWriter::Commit(
    std::vector<Pending>& group, const std::vector<OutboxMessage>& rows,
    const std::vector<std::string>& ack_ids, int64_t now, absl::StatusOr<AckTally>& tally) {
  std::vector<OutboxMessage> written;
  std::vector<absl::Status> statuses;
  AckTally acked;
  // WithWriter, not Write: the kept statements are reset after the
  // transaction, still under the writer's mutex.
  absl::Status tx = file_.WithWriter("commit a group", [&](SQLite::Database& db) {
    absl::Status s = WriteTransaction(db, [&]() -> absl::Status {
      written = rows;  // a retried body starts over
      statuses.assign(rows.size(), absl::OkStatus());
      if (statements_ == nullptr) statements_ = std::make_unique<Statements>(db);
      Statements& st = *statements_;
      st.Reset();
      for (size_t i = 0; i < rows.size(); ++i) {
        statuses[i] = WriteOne(st.savepoint, st.release, st.rollback_to, st.outbox, db,
                               group[i].business, written[i]);
        if (!statuses[i].ok() && sqlite3_get_autocommit(db.getHandle()) != 0) {
          return statuses[i];  // the transaction is gone: the whole group fails
        }
      }
      acked = ack_ids.empty() ? AckTally{}
                              : outbox::RecordAcks(st.acks, db, ack_ids, now, outbox_.on_closed());
      if (!options_.before_commit_failpoint.empty()) Failpoint(options_.before_commit_failpoint);
      return absl::OkStatus();
    });
    if (statements_ != nullptr) statements_->Reset();
    return s;
  });
  if (tx.ok()) {
    tally = std::move(acked);
  } else {
    commit_failures_.Add();
    tally = tx;
  }
  return GroupOutcomes(rows.size(), tx, written, statuses);
}

void GroupWriter::AnswerAcks(const absl::StatusOr<AckTally>& tally,
                             const std::vector<PendingAcks*>& acks) {
  if (acks.empty()) return;
  MutexLock lock(&writes_.mu());
  // Each ack batch learns its own counts only roughly (the group's tally is
  // split in order; there is one ack listener, so nearly always one batch);
  // what matters to it is success or failure.
  AckTally left = tally.ok() ? *tally : AckTally{};
  for (PendingAcks* m : acks) {
    if (!tally.ok()) {
      m->tally = tally.status();
    } else {
      m->tally = TakeShare(left, static_cast<int>(m->message_ids->size()));
    }
    m->done = true;
  }
}

void GroupWriter::CommitGroup(std::vector<Pending>& group, std::vector<PendingAcks*>& acks) {
  const int64_t now = clock_.NowMillis();
  const std::vector<OutboxMessage> rows = NewGroupRows(group, now, outbox_.retry());
  // Acks that came in meanwhile ride this commit too, rather than waiting a
  // whole cycle for the next one.
  {
    MutexLock lock(&writes_.mu());
    acks.insert(acks.end(), acks_.begin(), acks_.end());
    acks_.clear();
  }
  std::vector<std::string> ack_ids;
  for (const PendingAcks* m : acks) {
    ack_ids.insert(ack_ids.end(), m->message_ids->begin(), m->message_ids->end());
  }
  absl::StatusOr<AckTally> tally = AckTally{};
  std::vector<absl::StatusOr<OutboxMessage>> outcomes = Commit(group, rows, ack_ids, now, tally);

  // Committed: the new messages to the relay, past the crash point between
  // commit and publish.
  std::vector<OutgoingMessage> messages = CommittedMessages(outcomes);
  if (!options_.after_commit_failpoint.empty()) Failpoint(options_.after_commit_failpoint);
  groups_.Add();
  written_.Add(static_cast<int64_t>(messages.size()));
  if (!messages.empty()) relay_.Enqueue(std::move(messages), absl::FromUnixMillis(now));
  // The ack listener first: its rows are SENT now, and it acks them while
  // the callers below are answered.
  AnswerAcks(tally, acks);
  AnswerWrites(group, outcomes);
}

}  // namespace outbox
