#include "shared/sqlite/internal/recovery_store.h"

#include <algorithm>
#include <filesystem>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "shared/base/status_macros.h"
#include "shared/outbox/internal/due_rows.h"
#include "shared/outbox/internal/failure.h"
#include "shared/outbox/internal/state_machine.h"
#include "shared/sqlite/internal/history.h"
#include "shared/sqlite/outbox_table.h"

namespace outbox {
namespace {

constexpr char kLeaseName[] = "recovery";

// Page cache of the writer connection, in KiB. A claim of 1,000 rows
// scattered through a big outbox reads and dirties about as many table
// pages, plus index pages: SQLite's default 2,000 KiB (500 pages) cannot
// hold them, so each UPDATE read its page again and dirty pages spilled to
// the WAL before the commit. 16 MiB holds a claim of 1,000 (claim_bench:
// the updates took 5 ms instead of 9 in a 5,000,000-row outbox). It fills
// only as pages are used.
constexpr int kWriterCacheKib = 16 * 1024;

constexpr char kClaimSelect[] =
    "SELECT %s FROM outbox o INDEXED BY outbox_status_next_retry "
    "WHERE o.status = 'SENDING' AND o.next_retry_at <= ?1 ORDER BY o.next_retry_at LIMIT ?2";

std::string ClaimSql() {
  std::string sql = kClaimSelect;
  return sql.replace(sql.find("%s"), 2, kOutboxColumns);
}

std::string SelectWhere(const std::string& where) {
  return absl::StrCat("SELECT ", kOutboxColumns, " FROM outbox o ", where);
}

// A claim's transaction on the writer: its statements throw, which rolls
// the transaction back (SqliteFile::Write).
class SqliteDueRows final : public DueRowsTransaction {
 public:
  SqliteDueRows(SQLite::Database& db, const RowClosed& on_closed)
      : db_(db), on_closed_(on_closed) {}

  absl::StatusOr<std::optional<LeaseState>> LockLease() override {
    SQLite::Statement lease(db_, "SELECT holder, expires_at FROM recovery_lease WHERE name = ?");
    lease.bind(1, kLeaseName);
    if (!lease.executeStep()) return std::optional<LeaseState>();
    return std::optional<LeaseState>(
        LeaseState{lease.getColumn(0).getString(), lease.getColumn(1).getInt64()});
  }
  absl::StatusOr<std::vector<OutboxMessage>> LoadDue(int64_t now_ms, int limit) override {
    SQLite::Statement select(db_, ClaimSql());
    select.bind(1, static_cast<int64_t>(now_ms));
    select.bind(2, limit);
    std::vector<OutboxMessage> rows;
    while (select.executeStep()) rows.push_back(ReadOutboxMessage(select));
    return rows;
  }
  absl::Status Save(const OutboxMessage& row) override {
    if (!table_) table_.emplace(db_);
    table_->Save(row);
    return absl::OkStatus();
  }
  absl::Status Closed(const OutboxMessage& row) override {
    RunRowClosed(on_closed_, db_, row);  // its failure is logged; the row closes all the same
    return absl::OkStatus();
  }
  absl::Status AppendHistory(const std::string& message_id, int64_t at_ms,
                             const std::string& instance, const char* event,
                             const std::string& detail) override {
    if (!history_) history_.emplace(db_);
    history_->Append(message_id, at_ms, instance, event, detail);
    return absl::OkStatus();
  }

 private:
  SQLite::Database& db_;
  const RowClosed& on_closed_;
  std::optional<OutboxStateTable> table_;
  std::optional<HistoryLog> history_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RecoveryStore>> RecoveryStore::Open(const std::string& path,
                                                                   const DbOptions& options,
                                                                   const ProducerDb& producer) {
  if (producer.schema == nullptr) return absl::InvalidArgumentError("ProducerDb.schema is null");
  std::error_code ignored;
  if (!std::filesystem::exists(path, ignored)) {
    return absl::NotFoundError(absl::StrCat(producer.name, " ", path, " does not exist"));
  }
  const DbSchema& schema = *producer.schema;
  // A newer file is refused before SQLite opens it, so nothing is created
  // beside it.
  if (const int peeked = PeekSchemaVersion(path); peeked > schema.latest()) {
    return NewerSchemaError(path, peeked, schema);
  }
  int version = 0;
  RETURN_IF_ERROR(CatchSqlite(absl::StrCat("open ", path), [&] {
    // A plain connection: it only reads the version, and changes nothing in a
    // file its producer may be creating or upgrading right now.
    SQLite::Database db(path, SQLite::OPEN_READWRITE);
    db.setBusyTimeout(options.busy_timeout_ms);
    version = SchemaVersion(db);
    return absl::OkStatus();
  }));
  if (version > schema.latest()) return NewerSchemaError(path, version, schema);
  if (version < schema.latest()) {
    return absl::NotFoundError(absl::StrCat(producer.name, " ", path, " has schema version ",
                                            version, ", not ", schema.latest(), " yet (",
                                            producer.producer, " creates and upgrades it)"));
  }
  // A claim dirties a page per scattered row; the checkpoint that copies
  // them runs after the claim's commit, never inside its transaction
  // (wal_checkpointer.h).
  DbOptions existing = options;
  existing.create_if_missing = false;
  ASSIGN_OR_RETURN(auto db, OpenSqliteFile(path, existing, nullptr));
  RETURN_IF_ERROR(db->WithWriter("writer cache size", [&](SQLite::Database& writer) {
    writer.exec(absl::StrCat("PRAGMA cache_size=-", kWriterCacheKib));
    return absl::OkStatus();
  }));
  bool retention_tables = false;
  RETURN_IF_ERROR(db->Read("look for outbox_retention", [&](SQLite::Database& reader) {
    retention_tables = reader.tableExists("outbox_retention");
    return absl::OkStatus();
  }));
  return std::unique_ptr<RecoveryStore>(
      new RecoveryStore(std::move(db), producer.metrics_label, retention_tables));
}

absl::StatusOr<std::unique_ptr<RecoveryStore>> RecoveryStore::OpenWhenCreated(
    const std::string& path, const DbOptions& options, const ProducerDb& producer,
    absl::Duration wait, const std::function<void(const absl::Status&)>& on_first_wait,
    absl::Duration poll) {
  const absl::Time deadline = absl::Now() + wait;
  bool waited = false;
  while (true) {
    auto store = Open(path, options, producer);
    const absl::Status& s = store.status();
    if (!absl::IsNotFound(s) && !absl::IsUnavailable(s)) return store;
    if (absl::Now() >= deadline) {
      if (!absl::IsNotFound(s)) return store;
      const std::string setting = producer.path_setting.empty()
                                      ? ""
                                      : absl::StrCat("is ", producer.path_setting, " right? ");
      return absl::FailedPreconditionError(absl::StrCat(s.message(), " after ",
                                                        absl::FormatDuration(wait), "; ", setting,
                                                        producer.producer, " creates it"));
    }
    if (!waited) {
      waited = true;
      if (on_first_wait) on_first_wait(s);
    }
    absl::SleepFor(std::min(poll, deadline - absl::Now()));
  }
}

DueRowsRunner RecoveryStore::DueRows() {
  return [this](const std::function<absl::Status(DueRowsTransaction&)>& body) {
    return db_->Write([&](SQLite::Database& db) {
      SqliteDueRows tx(db, on_closed_);
      return body(tx);
    });
  };
}

absl::StatusOr<Claimed> RecoveryStore::ClaimDue(int64_t now_ms, int limit,
                                                const std::string& lease_holder,
                                                const RetryPolicy& policy) {
  return ClaimDueRows(DueRows(), now_ms, limit, lease_holder, instance_, policy);
}

absl::StatusOr<int> RecoveryStore::DeferDue(int64_t now_ms, int limit,
                                            const std::string& lease_holder,
                                            const RetryPolicy& policy) {
  return DeferDueRows(DueRows(), now_ms, limit, lease_holder, instance_, policy);
}

absl::StatusOr<std::vector<OutboxMessage>> RecoveryStore::ListFailed(int limit) {
  std::vector<OutboxMessage> rows;
  RETURN_IF_ERROR(db_->Read("list failed", [&](SQLite::Database& reader) {
    SQLite::Statement stmt(reader,
                           SelectWhere("WHERE o.status = 'FAILED' AND o.failure_kind != 'rejected' "
                                       "AND o.acknowledged_by = '' ORDER BY o.id LIMIT ?1"));
    stmt.bind(1, limit);
    while (stmt.executeStep()) rows.push_back(ReadOutboxMessage(stmt));
    return absl::OkStatus();
  }));
  return rows;
}

std::string RecoveryStore::ExplainClaim() {
  std::string plan;
  absl::Status s = db_->Read("explain claim", [&](SQLite::Database& reader) {
    SQLite::Statement stmt(reader, absl::StrCat("EXPLAIN QUERY PLAN ", ClaimSql()));
    stmt.bind(1, static_cast<int64_t>(0));
    stmt.bind(2, 1);
    while (stmt.executeStep()) absl::StrAppend(&plan, stmt.getColumn(3).getString(), "\n");
    return absl::OkStatus();
  });
  return s.ok() ? plan : std::string(s.message());
}

absl::Status RecoveryStore::RecordPublishFailure(const std::vector<std::string>& message_ids,
                                                 const std::string& error, int64_t now_ms) {
  return db_->Write([&](SQLite::Database& writer) {
    outbox::RecordPublishFailure(writer, message_ids, error, now_ms, instance_);
    return absl::OkStatus();
  });
}

absl::StatusOr<bool> RecoveryStore::TryAcquireLease(const std::string& holder, int64_t now_ms,
                                                    int64_t ttl_ms) {
  bool acquired = false;
  RETURN_IF_ERROR(db_->Write([&](SQLite::Database& writer) {
    SQLite::Statement stmt(writer, R"sql(
      INSERT INTO recovery_lease (name, holder, expires_at) VALUES (?1, ?2, ?3)
      ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
      WHERE recovery_lease.holder = excluded.holder OR recovery_lease.expires_at <= ?4)sql");
    stmt.bind(1, kLeaseName);
    stmt.bind(2, holder);
    stmt.bind(3, static_cast<int64_t>(now_ms + ttl_ms));
    stmt.bind(4, static_cast<int64_t>(now_ms));
    acquired = stmt.exec() == 1;
    return absl::OkStatus();
  }));
  return acquired;
}

absl::Status RecoveryStore::ReleaseLease(const std::string& holder, int64_t now_ms) {
  return db_->Write([&](SQLite::Database& writer) {
    SQLite::Statement stmt(
        writer, "UPDATE recovery_lease SET expires_at = ?1 WHERE name = ?2 AND holder = ?3");
    stmt.bind(1, static_cast<int64_t>(now_ms));
    stmt.bind(2, kLeaseName);
    stmt.bind(3, holder);
    stmt.exec();
    return absl::OkStatus();
  });
}

absl::StatusOr<LeaseState> RecoveryStore::Lease() {
  LeaseState state;
  RETURN_IF_ERROR(db_->Read("read lease", [&](SQLite::Database& reader) {
    SQLite::Statement stmt(reader, "SELECT holder, expires_at FROM recovery_lease WHERE name = ?");
    stmt.bind(1, kLeaseName);
    if (stmt.executeStep()) {
      state.holder = stmt.getColumn(0).getString();
      state.expires_at = stmt.getColumn(1).getInt64();
    }
    return absl::OkStatus();
  }));
  return state;
}

absl::StatusOr<int> RecoveryStore::ArchiveSent(int64_t cutoff_ms, int batch) {
  int moved = 0;
  RETURN_IF_ERROR(db_->Write([&](SQLite::Database& writer) {
    // A bounded batch per transaction: never one statement over the table.
    const std::string pick =
        "SELECT id FROM outbox INDEXED BY outbox_sent_at WHERE status = 'SENT' AND sent_at < ?1 "
        "ORDER BY sent_at LIMIT ?2";
    SQLite::Statement copy(
        writer,
        absl::StrCat("INSERT INTO outbox_archive SELECT * FROM outbox WHERE id IN (", pick, ")"));
    copy.bind(1, static_cast<int64_t>(cutoff_ms));
    copy.bind(2, batch);
    copy.exec();
    // Their history goes with them (history.h).
    SQLite::Statement history(
        writer,
        absl::StrCat("DELETE FROM outbox_history WHERE message_id IN (SELECT message_id FROM "
                     "outbox WHERE id IN (",
                     pick, "))"));
    history.bind(1, static_cast<int64_t>(cutoff_ms));
    history.bind(2, batch);
    history.exec();
    SQLite::Statement del(writer, absl::StrCat("DELETE FROM outbox WHERE id IN (", pick, ")"));
    del.bind(1, static_cast<int64_t>(cutoff_ms));
    del.bind(2, batch);
    moved = del.exec();
    return absl::OkStatus();
  }));
  return moved;
}

absl::StatusOr<int> RecoveryStore::PruneArchive(int64_t cutoff_ms, int batch) {
  return PruneOlderThan("outbox_archive", "outbox_archive_sent_at", "sent_at", cutoff_ms, batch);
}

absl::StatusOr<int> RecoveryStore::PruneAudit(int64_t cutoff_ms, int batch) {
  return PruneOlderThan("outbox_audit", "outbox_audit_at", "at", cutoff_ms, batch);
}

absl::StatusOr<int> RecoveryStore::PruneOlderThan(const char* table, const char* index,
                                                  const char* column, int64_t cutoff_ms,
                                                  int batch) {
  if (!retention_tables_) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot prune ", table,
                     ": the database has no outbox_retention (its producer's schema "
                     "needs a migration that calls CreateOutboxRetentionTables)"));
  }
  // The pick walks the index from its oldest entry and stops after `batch`:
  // a bounded delete, however large the table.
  const std::string pick = absl::StrCat("SELECT rowid FROM ", table, " INDEXED BY ", index,
                                        " WHERE ", column, " < ?1 ORDER BY ", column, " LIMIT ?2");
  bool due = false;
  RETURN_IF_ERROR(
      db_->Read(absl::StrCat("find ", table, " rows to prune"), [&](SQLite::Database& reader) {
        SQLite::Statement look(reader, pick);
        look.bind(1, static_cast<int64_t>(cutoff_ms));
        look.bind(2, 1);
        due = look.executeStep();
        return absl::OkStatus();
      }));
  if (!due) return 0;
  int pruned = 0;
  RETURN_IF_ERROR(db_->Write([&](SQLite::Database& writer) {
    SQLite::Statement del(writer,
                          absl::StrCat("DELETE FROM ", table, " WHERE rowid IN (", pick, ")"));
    del.bind(1, static_cast<int64_t>(cutoff_ms));
    del.bind(2, batch);
    pruned = del.exec();
    if (pruned == 0) return absl::OkStatus();
    // The watermark commits with the delete: a reader never sees rows gone
    // without it.
    SQLite::Statement mark(writer, R"sql(
      INSERT INTO outbox_retention (name, pruned_before, pruned_rows) VALUES (?1, ?2, ?3)
      ON CONFLICT (name) DO UPDATE SET
        pruned_before = max(pruned_before, excluded.pruned_before),
        pruned_rows = pruned_rows + excluded.pruned_rows)sql");
    mark.bind(1, table);
    mark.bind(2, static_cast<int64_t>(cutoff_ms));
    mark.bind(3, pruned);
    mark.exec();
    return absl::OkStatus();
  }));
  return pruned;
}

absl::StatusOr<OutboxMessage> RecoveryStore::Get(const std::string& message_id) {
  std::optional<OutboxMessage> row;
  RETURN_IF_ERROR(db_->Read("get message", [&](SQLite::Database& reader) {
    SQLite::Statement stmt(reader, SelectWhere("WHERE o.message_id = ?"));
    stmt.bind(1, message_id);
    if (stmt.executeStep()) row = ReadOutboxMessage(stmt);
    return absl::OkStatus();
  }));
  if (!row) return absl::NotFoundError(absl::StrCat("message '", message_id, "' not found"));
  return *row;
}

absl::StatusOr<std::vector<FailureGroup>> RecoveryStore::FailureGroups(int limit,
                                                                       const std::string& kind) {
  std::vector<FailureGroup> groups;
  RETURN_IF_ERROR(db_->Read("list failure groups", [&](SQLite::Database& reader) {
    SQLite::Statement stmt(reader, R"sql(
      SELECT failure_group, count(*), sum(acknowledged_by != ''), min(updated_at),
             max(updated_at), max(id)
      FROM outbox INDEXED BY outbox_failure_group
      WHERE status = 'FAILED' AND (?1 = '' OR failure_kind = ?1)
      GROUP BY failure_group
      ORDER BY count(*) - sum(acknowledged_by != '') DESC, count(*) DESC, failure_group
      LIMIT ?2)sql");
    stmt.bind(1, kind);
    stmt.bind(2, limit);
    std::vector<int64_t> examples;
    while (stmt.executeStep()) {
      FailureGroup g;
      g.group = stmt.getColumn(0).getString();
      g.count = stmt.getColumn(1).getInt64();
      g.acknowledged = stmt.getColumn(2).getInt64();
      g.first_seen = stmt.getColumn(3).getInt64();
      g.last_seen = stmt.getColumn(4).getInt64();
      examples.push_back(stmt.getColumn(5).getInt64());
      groups.push_back(std::move(g));
    }
    SQLite::Statement example(reader,
                              "SELECT message_id, topic, failure_kind, last_error FROM outbox "
                              "WHERE id = ?");
    for (size_t i = 0; i < groups.size(); ++i) {
      example.reset();
      example.bind(1, static_cast<int64_t>(examples[i]));
      if (!example.executeStep()) continue;
      groups[i].example_message_id = example.getColumn(0).getString();
      groups[i].topic = example.getColumn(1).getString();
      groups[i].kind = example.getColumn(2).getString();
      groups[i].example_error = example.getColumn(3).getString();
      groups[i].pattern = FailurePattern(groups[i].example_error);
    }
    return absl::OkStatus();
  }));
  return groups;
}

absl::StatusOr<int64_t> RecoveryStore::CountSendingOlderThan(int64_t created_before_ms) {
  int64_t n = 0;
  RETURN_IF_ERROR(db_->Read("count backlog", [&](SQLite::Database& reader) {
    SQLite::Statement stmt(
        reader, "SELECT COUNT(*) FROM outbox WHERE status = 'SENDING' AND created_at < ?");
    stmt.bind(1, static_cast<int64_t>(created_before_ms));
    stmt.executeStep();
    n = stmt.getColumn(0).getInt64();
    return absl::OkStatus();
  }));
  return n;
}

absl::StatusOr<AckProgress> RecoveryStore::ReadAckProgress() {
  AckProgress p;
  RETURN_IF_ERROR(db_->Read("read ack progress", [&](SQLite::Database& reader) {
    // Each side is one walk down an index: outbox_sent_at (partial, SENT
    // rows) and outbox_status_next_retry.
    SQLite::Statement stmt(reader, R"sql(
      SELECT (SELECT coalesce(max(sent_at), 0) FROM outbox WHERE status = 'SENT'),
             next_retry_at, last_attempt_at
      FROM (SELECT 1) LEFT JOIN (SELECT next_retry_at, last_attempt_at FROM outbox
                                 WHERE status = 'SENDING' ORDER BY next_retry_at LIMIT 1))sql");
    stmt.executeStep();
    p.last_acked_at = stmt.getColumn(0).getInt64();
    p.first_due_at = stmt.getColumn(1).isNull() ? 0 : stmt.getColumn(1).getInt64();
    p.first_due_published_at = stmt.getColumn(2).isNull() ? 0 : stmt.getColumn(2).getInt64();
    return absl::OkStatus();
  }));
  return p;
}

}  // namespace outbox
