#include "shared/postgres/internal/pg_group_writer.h"

#include <map>
#include <set>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/postgres/pg_outbox_table.h"
#include "shared/runtime/internal/failpoint.h"

namespace outbox {
namespace {

using Key = std::pair<std::string, std::string>;  // biz_type, biz_key

absl::Status Taken(const OutboxMessage& row, bool by_id) {
  return by_id ? absl::AlreadyExistsError(
                     absl::StrCat("message '", row.message_id, "' is in the outbox already"))
               : absl::AlreadyExistsError(absl::StrCat("business key ", row.biz_type, "/",
                                                       row.biz_key, " is in the outbox already"));
}

// The message ids and business keys of the group already in the table.
struct TakenSet {
  std::set<std::string> ids;
  std::set<Key> keys;

  // ALREADY_EXISTS when `row`'s id or key is taken; OK (nothing noted).
  absl::Status Check(const OutboxMessage& row) const {
    if (ids.count(row.message_id) > 0) return Taken(row, true);
    if (keys.count(Key{row.biz_type, row.biz_key}) > 0) return Taken(row, false);
    return absl::OkStatus();
  }
  void Add(const OutboxMessage& row) {
    ids.insert(row.message_id);
    keys.emplace(row.biz_type, row.biz_key);
  }
  // Only for a row Check passed and Add added.
  void Remove(const OutboxMessage& row) {
    ids.erase(row.message_id);
    keys.erase(Key{row.biz_type, row.biz_key});
  }
};

absl::StatusOr<TakenSet> FindTaken(PgConnection& conn, const std::vector<OutboxMessage>& rows) {
  std::vector<std::string> ids, types, keys;
  for (const OutboxMessage& row : rows) {
    ids.push_back(row.message_id);
    types.push_back(row.biz_type);
    keys.push_back(row.biz_key);
  }
  ASSIGN_OR_RETURN(PgResult r,
                   conn.Query(R"sql(
        SELECT 'id', message_id, '' FROM outbox WHERE message_id = ANY($1::text[])
        UNION ALL
        SELECT 'key', o.biz_type, o.biz_key
          FROM outbox o JOIN unnest($2::text[], $3::text[]) AS k (t, b)
            ON o.biz_type = k.t AND o.biz_key = k.b)sql",
                              {PgTextArray(ids), PgTextArray(types), PgTextArray(keys)}));
  TakenSet taken;
  for (int i = 0; i < r.rows(); ++i) {
    if (r.Get(i, 0) == "id") {
      taken.ids.emplace(r.Get(i, 1));
    } else {
      taken.keys.emplace(std::string(r.Get(i, 1)), std::string(r.Get(i, 2)));
    }
  }
  return taken;
}

// The rows `live` of `rows` in one INSERT, one array per column; sets their ids.
absl::Status InsertRows(PgConnection& conn, std::vector<OutboxMessage>& rows,
                        const std::vector<size_t>& live) {
  constexpr int kColumns = 21;
  std::vector<std::vector<std::string>> cols(kColumns);
  for (size_t i : live) {
    const OutboxMessage& row = rows[i];
    int c = 0;
    cols[c++].push_back(row.message_id);
    cols[c++].push_back(row.biz_type);
    cols[c++].push_back(row.biz_key);
    cols[c++].push_back(row.topic);
    cols[c++].push_back(row.message_type);
    cols[c++].push_back(row.reply_to);
    cols[c++].push_back(absl::BytesToHexString(row.payload));
    cols[c++].push_back(std::string(StatusName(row.status)));
    cols[c++].push_back(std::to_string(row.attempts));
    cols[c++].push_back(std::to_string(row.max_attempts));
    cols[c++].push_back(std::to_string(row.next_retry_at));
    cols[c++].push_back(std::to_string(row.last_attempt_at));
    cols[c++].push_back(row.last_error);
    cols[c++].push_back(std::to_string(row.created_at));
    cols[c++].push_back(std::to_string(row.updated_at));
    cols[c++].push_back(std::to_string(row.sent_at));
    cols[c++].push_back(row.traceparent);
    cols[c++].push_back(row.failure_kind);
    cols[c++].push_back(row.failure_group);
    cols[c++].push_back(row.acknowledged_by);
    cols[c++].push_back(std::to_string(row.restarted_at));
  }
  std::vector<PgParam> params;
  for (const std::vector<std::string>& col : cols) params.emplace_back(PgTextArray(col));
  ASSIGN_OR_RETURN(PgResult r, conn.Query(R"sql(
        INSERT INTO outbox (message_id, biz_type, biz_key, topic, message_type, reply_to, payload,
                            status, attempts, max_attempts, next_retry_at, last_attempt_at,
                            last_error, created_at, updated_at, sent_at, traceparent,
                            failure_kind, failure_group, acknowledged_by, restarted_at)
        SELECT m, bt, bk, t, mt, rt, decode(p, 'hex'), s, a, ma, nr, la, le, c, u, se, tp, fk, fg,
               ab, ra
          FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                      $7::text[], $8::text[], $9::int[], $10::int[], $11::bigint[], $12::bigint[],
                      $13::text[], $14::bigint[], $15::bigint[], $16::bigint[], $17::text[],
                      $18::text[], $19::text[], $20::text[], $21::bigint[])
               WITH ORDINALITY AS r (m, bt, bk, t, mt, rt, p, s, a, ma, nr, la, le, c, u, se, tp,
                                     fk, fg, ab, ra, n)
         ORDER BY n
        RETURNING id, message_id)sql",
                                          params));
  std::map<std::string, int64_t> ids;
  for (int i = 0; i < r.rows(); ++i) {
    int64_t id = 0;
    if (absl::SimpleAtoi(r.Get(i, 0), &id)) ids.emplace(std::string(r.Get(i, 1)), id);
  }
  for (size_t i : live) rows[i].id = ids[rows[i].message_id];
  return absl::OkStatus();
}

// One write under its savepoint: its business step and, when `insert_row`,
// its outbox row. The write's own failure is returned in `mine` (its rows
// rolled back); an error of the transaction (the link) is returned.
absl::Status WriteOne(PgConnection& conn, const PgBusinessWrite& business, OutboxMessage& row,
                      bool insert_row, absl::Status& mine) {
  RETURN_IF_ERROR(conn.Exec("SAVEPOINT outbox_group_write"));
  mine = business(conn);
  if (mine.ok() && insert_row) {
    absl::StatusOr<int64_t> id = InsertPgOutboxRow(conn, row);
    if (id.ok()) row.id = *id;
    mine = id.status();
  }
  // A step that swallowed a failed statement leaves the transaction
  // aborted: RELEASE says so, and the write fails with that.
  if (mine.ok()) mine = conn.Exec("RELEASE outbox_group_write");
  if (mine.ok()) return absl::OkStatus();
  if (!conn.ok()) return mine;  // the link is gone: the whole group fails
  RETURN_IF_ERROR(conn.Exec("ROLLBACK TO outbox_group_write"));
  return conn.Exec("RELEASE outbox_group_write");
}

}  // namespace

absl::Status PgGroupWriterOptions::Validate() const {
  if (max_batch < 1) return absl::InvalidArgumentError("max_batch must be >= 1");
  if (max_unsent < 0) return absl::InvalidArgumentError("max_unsent must be >= 0 (0: off)");
  if (max_hold < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("max_hold must not be negative");
  }
  if (written_metric.empty()) return absl::InvalidArgumentError("written_metric is required");
  return absl::OkStatus();
}

PgGroupWriter::PgGroupWriter(PgSession& session, const PgOutbox& outbox, RelayQueue& relay,
                             const Clock& clock, MetricsRegistry& metrics,
                             PgGroupWriterOptions options)
    : session_(session),
      outbox_(outbox),
      relay_(relay),
      clock_(clock),
      options_(std::move(options)),
      groups_(metrics.AddCounter("outbox_group_commits_total",
                                 "write transactions (groups of writes)")),
      written_(metrics.AddCounter(options_.written_metric, options_.written_help)),
      holds_(metrics.AddCounter("outbox_writer_holds_total",
                                "groups of new writes held back while the consumer lagged")),
      commit_failures_(StoreWriteFailures(metrics, "commit_group")),
      hold_(options_.max_unsent, options_.max_hold, clock_,
            [this](int64_t limit) { return CountSending(limit); }) {}

PgGroupWriter::~PgGroupWriter() {
  Stop();
}

void PgGroupWriter::Start() {
  writes_.Start();
}

void PgGroupWriter::Stop() {
  writes_.Stop();
}

void PgGroupWriter::WriteAsync(MessageSpec spec, PgBusinessWrite business, WriteDone done) {
  writes_.Push({std::move(spec), std::move(business), std::move(done)});
}

absl::StatusOr<OutboxMessage> PgGroupWriter::Write(MessageSpec spec, PgBusinessWrite business) {
  return writes_.PushAndWait({std::move(spec), std::move(business), nullptr});
}

void PgGroupWriter::AcksApplied() {
  MutexLock lock(&writes_.mu());
  ++acks_applied_;
  last_ack_ms_ = clock_.NowMillis();
}

void PgGroupWriter::Run() {
  std::vector<Pending> group;
  while (true) {
    bool acked = false;  // acknowledgements ended a hold: the backlog is counted again first
    {
      MutexLock lock(&writes_.mu());
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(writes_.mu()) {
        return !writes_.empty() || writes_.stopping();
      };
      writes_.mu().Await(absl::Condition(&ready));
      if (writes_.empty()) return;  // stopping and drained
      if (!writes_.stopping() && clock_.Now() < hold_.until()) {
        // The consumer lags: new writes wait for its next acknowledgements
        // (each lowers the backlog), or for the end of the hold.
        holds_.Add();
        const int64_t seen = acks_applied_;
        auto ack_or_stop = [this, seen]() ABSL_SHARED_LOCKS_REQUIRED(writes_.mu()) {
          return acks_applied_ != seen || writes_.stopping();
        };
        writes_.mu().AwaitWithTimeout(absl::Condition(&ack_or_stop), hold_.until() - clock_.Now());
        acked = acks_applied_ != seen && !writes_.stopping();
      }
      if (!acked) writes_.Take(options_.max_batch, group);
    }
    if (!group.empty()) CommitGroup(group);
    group.clear();
    int64_t last_ack_ms;
    {
      MutexLock lock(&writes_.mu());
      last_ack_ms = last_ack_ms_;
    }
    hold_.After(/*wrote=*/!acked, last_ack_ms);
  }
}

absl::StatusOr<int64_t> PgGroupWriter::CountSending(int64_t limit) {
  int64_t count = 0;
  RETURN_IF_ERROR(session_.Transaction("count SENDING rows", [&](PgConnection& conn) {
    ASSIGN_OR_RETURN(
        PgResult r,
        conn.Query(
            "SELECT count(*) FROM (SELECT 1 FROM outbox WHERE status = 'SENDING' LIMIT $1) AS s",
            {std::to_string(limit)}));
    if (r.rows() != 1 || !absl::SimpleAtoi(r.Get(0, 0), &count)) {
      return absl::InternalError("count SENDING rows: no count");
    }
    return absl::OkStatus();
  }));
  return count;
}

std::vector<absl::StatusOr<OutboxMessage>> PgGroupWriter::Commit(
    std::vector<Pending>& group, const std::vector<OutboxMessage>& rows) {
  std::vector<OutboxMessage> written;
  std::vector<absl::Status> statuses;
  // Grouped: the taken ids first, the business steps, the rows in one INSERT.
  bool conflict = false;
  absl::Status tx = session_.Transaction("commit a group", [&](PgConnection& conn) {
    written = rows;  // a transaction run again starts over
    statuses.assign(rows.size(), absl::OkStatus());
    conflict = false;
    // The table's ids and keys, then each write's as it succeeds: a write
    // repeating one of them fails before its business step runs.
    ASSIGN_OR_RETURN(TakenSet taken, FindTaken(conn, written));
    std::vector<size_t> live;
    // The savepoint of live.back() is still open: it is released in the
    // same round trip as the next write's savepoint is taken.
    bool open = false;
    auto close_then = [&](absl::string_view then) -> absl::Status {
      if (!open) return then.empty() ? absl::OkStatus() : conn.Exec(then);
      open = false;
      absl::Status s =
          conn.Exec(absl::StrCat("RELEASE outbox_group_write", then.empty() ? "" : "; ", then));
      if (s.ok() || !conn.ok()) return s;
      // A step that swallowed a failed statement left the transaction
      // aborted: RELEASE says so, and that write fails with it.
      const size_t last = live.back();
      live.pop_back();
      taken.Remove(written[last]);
      statuses[last] = s;
      RETURN_IF_ERROR(conn.Exec("ROLLBACK TO outbox_group_write; RELEASE outbox_group_write"));
      return then.empty() ? absl::OkStatus() : conn.Exec(then);
    };
    for (size_t i = 0; i < rows.size(); ++i) {
      statuses[i] = taken.Check(written[i]);
      if (!statuses[i].ok()) continue;
      RETURN_IF_ERROR(close_then("SAVEPOINT outbox_group_write"));
      statuses[i] = group[i].business(conn);
      if (statuses[i].ok()) {
        open = true;
        taken.Add(written[i]);
        live.push_back(i);
        continue;
      }
      if (!conn.ok()) return statuses[i];  // the link is gone: the whole group fails
      RETURN_IF_ERROR(conn.Exec("ROLLBACK TO outbox_group_write; RELEASE outbox_group_write"));
    }
    RETURN_IF_ERROR(close_then(""));
    if (!live.empty()) {
      absl::Status inserted = InsertRows(conn, written, live);
      if (absl::IsAlreadyExists(inserted)) conflict = true;
      RETURN_IF_ERROR(inserted);
    }
    if (!options_.before_commit_failpoint.empty()) Failpoint(options_.before_commit_failpoint);
    return absl::OkStatus();
  });
  if (conflict) {
    // Someone else took an id or key after the check: one INSERT per write,
    // each under its savepoint, as PgOutbox::Write would.
    ++rewrites_;
    tx = session_.Transaction("commit a group row by row", [&](PgConnection& conn) {
      written = rows;
      statuses.assign(rows.size(), absl::OkStatus());
      for (size_t i = 0; i < rows.size(); ++i) {
        RETURN_IF_ERROR(WriteOne(conn, group[i].business, written[i], true, statuses[i]));
      }
      if (!options_.before_commit_failpoint.empty()) Failpoint(options_.before_commit_failpoint);
      return absl::OkStatus();
    });
  }
  if (!tx.ok()) commit_failures_.Add();
  return GroupOutcomes(rows.size(), tx, written, statuses);
}

void PgGroupWriter::CommitGroup(std::vector<Pending>& group) {
  const int64_t now = clock_.NowMillis();
  std::vector<absl::StatusOr<OutboxMessage>> outcomes =
      Commit(group, NewGroupRows(group, now, outbox_.retry()));
  // Committed: the new messages to the relay, past the crash point between
  // commit and publish; then the callers.
  std::vector<OutgoingMessage> messages = CommittedMessages(outcomes);
  if (!options_.after_commit_failpoint.empty()) Failpoint(options_.after_commit_failpoint);
  groups_.Add();
  written_.Add(static_cast<int64_t>(messages.size()));
  if (!messages.empty()) relay_.Enqueue(std::move(messages), absl::FromUnixMillis(now));
  AnswerWrites(group, outcomes);
}

}  // namespace outbox
