#include "shared/postgres/internal/pg_recovery_store.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "shared/base/status_macros.h"
#include "shared/outbox/internal/due_rows.h"
#include "shared/outbox/internal/failure.h"
#include "shared/outbox/internal/state_machine.h"
#include "shared/postgres/internal/pg_outbox.h"

namespace outbox {
namespace {

constexpr char kLeaseName[] = "recovery";

// outbox's columns, for the copy into outbox_archive.
constexpr char kTableColumns[] =
    "id, message_id, biz_type, biz_key, topic, payload, status, attempts, max_attempts, "
    "next_retry_at, last_attempt_at, last_error, created_at, updated_at, sent_at, message_type, "
    "reply_to, traceparent, failure_kind, failure_group, acknowledged_by, restarted_at";

int64_t Int64(const PgResult& r, int row, int column) {
  int64_t v = 0;
  return absl::SimpleAtoi(r.Get(row, column), &v) ? v : 0;
}

class PgDueRows final : public DueRowsTransaction {
 public:
  PgDueRows(PgConnection& conn, const PgRowClosed& on_closed)
      : conn_(conn), on_closed_(on_closed) {}

  absl::StatusOr<std::optional<LeaseState>> LockLease() override {
    ASSIGN_OR_RETURN(PgResult lease, conn_.Query("SELECT holder, expires_at FROM recovery_lease "
                                                 "WHERE name = $1 FOR SHARE",
                                                 {kLeaseName}));
    if (lease.rows() == 0) return std::optional<LeaseState>();
    return std::optional<LeaseState>(LeaseState{std::string(lease.Get(0, 0)), Int64(lease, 0, 1)});
  }
  absl::StatusOr<std::vector<OutboxMessage>> LoadDue(int64_t now_ms, int limit) override {
    ASSIGN_OR_RETURN(
        PgResult r,
        conn_.Query(absl::StrCat("SELECT ", kPgOutboxColumns,
                                 " FROM outbox o WHERE o.status = 'SENDING' AND "
                                 "o.next_retry_at <= $1 ORDER BY o.next_retry_at LIMIT $2 "
                                 "FOR UPDATE SKIP LOCKED"),
                    {std::to_string(now_ms), std::to_string(limit)}));
    std::vector<OutboxMessage> rows;
    for (int i = 0; i < r.rows(); ++i) rows.push_back(ReadPgOutboxRow(r, i));
    return rows;
  }
  absl::Status Save(const OutboxMessage& row) override { return SavePgOutboxRow(conn_, row); }
  absl::Status Closed(const OutboxMessage& row) override {
    return RunPgRowClosed(on_closed_, conn_, row);
  }
  absl::Status AppendHistory(const std::string& message_id, int64_t at_ms,
                             const std::string& instance, const char* event,
                             const std::string& detail) override {
    return AppendPgHistory(conn_, message_id, at_ms, instance, event, detail);
  }

 private:
  PgConnection& conn_;
  const PgRowClosed& on_closed_;
};

}  // namespace

absl::StatusOr<OutboxMessage> PgRecoveryStore::Get(const std::string& message_id) {
  std::optional<OutboxMessage> row;
  RETURN_IF_ERROR(session_.Transaction("get message", [&](PgConnection& conn) {
    ASSIGN_OR_RETURN(row, LoadPgOutboxRow(conn, message_id));
    return absl::OkStatus();
  }));
  if (!row) return absl::NotFoundError(absl::StrCat("message '", message_id, "' not found"));
  return *std::move(row);
}

DueRowsRunner PgRecoveryStore::DueRows() {
  return [this](const std::function<absl::Status(DueRowsTransaction&)>& body) {
    return session_.Transaction("claim due rows", [&](PgConnection& conn) {
      PgDueRows tx(conn, on_closed_);
      return body(tx);
    });
  };
}

absl::StatusOr<Claimed> PgRecoveryStore::ClaimDue(int64_t now_ms, int limit,
                                                  const std::string& lease_holder,
                                                  const RetryPolicy& policy) {
  return ClaimDueRows(DueRows(), now_ms, limit, lease_holder, instance_, policy);
}

absl::StatusOr<int> PgRecoveryStore::DeferDue(int64_t now_ms, int limit,
                                              const std::string& lease_holder,
                                              const RetryPolicy& policy) {
  return DeferDueRows(DueRows(), now_ms, limit, lease_holder, instance_, policy);
}

absl::StatusOr<std::vector<OutboxMessage>> PgRecoveryStore::ListFailed(int limit) {
  std::vector<OutboxMessage> rows;
  RETURN_IF_ERROR(session_.Transaction("list failed", [&](PgConnection& conn) {
    rows.clear();
    ASSIGN_OR_RETURN(PgResult r,
                     conn.Query(absl::StrCat("SELECT ", kPgOutboxColumns,
                                             " FROM outbox o WHERE o.status = 'FAILED' AND "
                                             "o.failure_kind <> 'rejected' AND "
                                             "o.acknowledged_by = '' ORDER BY o.id LIMIT $1"),
                                {std::to_string(limit)}));
    for (int i = 0; i < r.rows(); ++i) rows.push_back(ReadPgOutboxRow(r, i));
    return absl::OkStatus();
  }));
  return rows;
}

absl::StatusOr<std::vector<FailureGroup>> PgRecoveryStore::FailureGroups(int limit,
                                                                         const std::string& kind) {
  std::vector<FailureGroup> groups;
  RETURN_IF_ERROR(session_.Transaction("list failure groups", [&](PgConnection& conn) {
    groups.clear();
    // Groups sort by their id's bytes, as SQLite's do.
    ASSIGN_OR_RETURN(PgResult r, conn.Query(R"sql(
      SELECT failure_group, count(*), count(*) FILTER (WHERE acknowledged_by <> ''),
             min(updated_at), max(updated_at), max(id)
      FROM outbox
      WHERE status = 'FAILED' AND ($1 = '' OR failure_kind = $1)
      GROUP BY failure_group
      ORDER BY count(*) - count(*) FILTER (WHERE acknowledged_by <> '') DESC, count(*) DESC,
               failure_group COLLATE "C"
      LIMIT $2)sql",
                                            {kind, std::to_string(limit)}));
    std::vector<std::string> examples;
    for (int i = 0; i < r.rows(); ++i) {
      FailureGroup g;
      g.group = std::string(r.Get(i, 0));
      g.count = Int64(r, i, 1);
      g.acknowledged = Int64(r, i, 2);
      g.first_seen = Int64(r, i, 3);
      g.last_seen = Int64(r, i, 4);
      examples.emplace_back(r.Get(i, 5));
      groups.push_back(std::move(g));
    }
    if (groups.empty()) return absl::OkStatus();
    ASSIGN_OR_RETURN(PgResult ex,
                     conn.Query("SELECT id, message_id, topic, failure_kind, last_error FROM "
                                "outbox WHERE id = ANY($1::bigint[])",
                                {absl::StrCat("{", absl::StrJoin(examples, ","), "}")}));
    for (int i = 0; i < ex.rows(); ++i) {
      const auto at = std::find(examples.begin(), examples.end(), ex.Get(i, 0));
      if (at == examples.end()) continue;
      FailureGroup& g = groups[static_cast<size_t>(at - examples.begin())];
      g.example_message_id = std::string(ex.Get(i, 1));
      g.topic = std::string(ex.Get(i, 2));
      g.kind = std::string(ex.Get(i, 3));
      g.example_error = std::string(ex.Get(i, 4));
      g.pattern = FailurePattern(g.example_error);
    }
    return absl::OkStatus();
  }));
  return groups;
}

absl::Status PgRecoveryStore::RecordPublishFailure(const std::vector<std::string>& message_ids,
                                                   const std::string& error, int64_t now_ms) {
  return session_.Transaction("record publish failures", [&](PgConnection& conn) {
    return PgRecordPublishFailure(conn, message_ids, error, now_ms, instance_);
  });
}

absl::StatusOr<bool> PgRecoveryStore::TryAcquireLease(const std::string& holder, int64_t now_ms,
                                                      int64_t ttl_ms) {
  bool acquired = false;
  RETURN_IF_ERROR(session_.Transaction("acquire the lease", [&](PgConnection& conn) {
    ASSIGN_OR_RETURN(PgResult r, conn.Query(R"sql(
      INSERT INTO recovery_lease (name, holder, expires_at) VALUES ($1, $2, $3)
      ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
      WHERE recovery_lease.holder = excluded.holder OR recovery_lease.expires_at <= $4)sql",
                                            {kLeaseName, holder, std::to_string(now_ms + ttl_ms),
                                             std::to_string(now_ms)}));
    acquired = r.affected() == 1;
    return absl::OkStatus();
  }));
  return acquired;
}

absl::Status PgRecoveryStore::ReleaseLease(const std::string& holder, int64_t now_ms) {
  return session_.Transaction("release the lease", [&](PgConnection& conn) {
    return conn
        .Query("UPDATE recovery_lease SET expires_at = $1 WHERE name = $2 AND holder = $3",
               {std::to_string(now_ms), kLeaseName, holder})
        .status();
  });
}

absl::StatusOr<LeaseState> PgRecoveryStore::Lease() {
  LeaseState state;
  RETURN_IF_ERROR(session_.Transaction("read the lease", [&](PgConnection& conn) {
    ASSIGN_OR_RETURN(
        PgResult r,
        conn.Query("SELECT holder, expires_at FROM recovery_lease WHERE name = $1", {kLeaseName}));
    state = LeaseState{};
    if (r.rows() > 0) {
      state.holder = std::string(r.Get(0, 0));
      state.expires_at = Int64(r, 0, 1);
    }
    return absl::OkStatus();
  }));
  return state;
}

absl::StatusOr<int> PgRecoveryStore::ArchiveSent(int64_t cutoff_ms, int batch) {
  int moved = 0;
  RETURN_IF_ERROR(session_.Transaction("archive sent rows", [&](PgConnection& conn) {
    // A bounded batch per transaction through outbox_sent_at; the rows'
    // history goes with them.
    ASSIGN_OR_RETURN(
        PgResult r,
        conn.Query(
            absl::StrCat("WITH picked AS (SELECT id FROM outbox WHERE status = 'SENT' AND "
                         "sent_at < $1 ORDER BY sent_at LIMIT $2 FOR UPDATE SKIP LOCKED), "
                         "moved AS (DELETE FROM outbox o USING picked p WHERE o.id = p.id "
                         "RETURNING o.*), "
                         "history AS (DELETE FROM outbox_history h USING moved m "
                         "WHERE h.message_id = m.message_id) "
                         "INSERT INTO outbox_archive (",
                         kTableColumns, ") SELECT ", kTableColumns, " FROM moved ORDER BY id"),
            {std::to_string(cutoff_ms), std::to_string(batch)}));
    moved = r.affected();
    return absl::OkStatus();
  }));
  return moved;
}

absl::StatusOr<int> PgRecoveryStore::PruneArchive(int64_t cutoff_ms, int batch) {
  return PruneOlderThan("outbox_archive", "sent_at", cutoff_ms, batch);
}

absl::StatusOr<int> PgRecoveryStore::PruneAudit(int64_t cutoff_ms, int batch) {
  return PruneOlderThan("outbox_audit", "at", cutoff_ms, batch);
}

absl::StatusOr<int> PgRecoveryStore::PruneOlderThan(const char* table, const char* column,
                                                    int64_t cutoff_ms, int batch) {
  int pruned = 0;
  RETURN_IF_ERROR(
      session_.Transaction(absl::StrCat("prune ", table), [&](PgConnection& conn) -> absl::Status {
        // The oldest `batch` rows through the table's index on `column`,
        // deleted by their tuple ids: a bounded delete however large the table.
        ASSIGN_OR_RETURN(
            PgResult r,
            conn.Query(absl::StrCat("WITH gone AS (DELETE FROM ", table,
                                    " WHERE ctid = ANY(ARRAY(SELECT ctid FROM ", table, " WHERE ",
                                    column, " < $1 ORDER BY ", column,
                                    " LIMIT $2)) RETURNING 1) SELECT count(*) FROM gone"),
                       {std::to_string(cutoff_ms), std::to_string(batch)}));
        pruned = static_cast<int>(Int64(r, 0, 0));
        if (pruned == 0) return absl::OkStatus();
        // The watermark commits with the delete: a reader never sees rows
        // gone without it.
        return conn
            .Query(R"sql(
              INSERT INTO outbox_retention (name, pruned_before, pruned_rows) VALUES ($1, $2, $3)
              ON CONFLICT (name) DO UPDATE SET
                pruned_before = greatest(outbox_retention.pruned_before, excluded.pruned_before),
                pruned_rows = outbox_retention.pruned_rows + excluded.pruned_rows)sql",
                   {std::string(table), std::to_string(cutoff_ms), std::to_string(pruned)})
            .status();
      }));
  return pruned;
}

absl::StatusOr<int64_t> PgRecoveryStore::CountSendingOlderThan(int64_t created_before_ms) {
  int64_t n = 0;
  RETURN_IF_ERROR(session_.Transaction("count backlog", [&](PgConnection& conn) {
    ASSIGN_OR_RETURN(PgResult r, conn.Query("SELECT count(*) FROM outbox WHERE status = "
                                            "'SENDING' AND created_at < $1",
                                            {std::to_string(created_before_ms)}));
    n = Int64(r, 0, 0);
    return absl::OkStatus();
  }));
  return n;
}

absl::StatusOr<AckProgress> PgRecoveryStore::ReadAckProgress() {
  AckProgress p;
  RETURN_IF_ERROR(session_.Transaction("read ack progress", [&](PgConnection& conn) {
    // Each side is one walk down an index: outbox_sent_at (partial, SENT
    // rows) and outbox_status_next_retry. NULL reads as 0.
    ASSIGN_OR_RETURN(PgResult r, conn.Query(R"sql(
      SELECT (SELECT coalesce(max(sent_at), 0) FROM outbox WHERE status = 'SENT'),
             d.next_retry_at, d.last_attempt_at
      FROM (SELECT 1) AS one
      LEFT JOIN (SELECT next_retry_at, last_attempt_at FROM outbox
                 WHERE status = 'SENDING' ORDER BY next_retry_at LIMIT 1) AS d ON true)sql"));
    p.last_acked_at = Int64(r, 0, 0);
    p.first_due_at = Int64(r, 0, 1);
    p.first_due_published_at = Int64(r, 0, 2);
    return absl::OkStatus();
  }));
  return p;
}

}  // namespace outbox
