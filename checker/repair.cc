#include "checker/repair.h"

#include <SQLiteCpp/SQLiteCpp.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "checker/pg_copy.h"
#include "checker/report.h"
#include "shared/outbox/internal/state_machine.h"
#include "shared/postgres/pg_connection.h"
#include "shared/postgres/pg_outbox_table.h"
#include "shared/postgres/pg_session.h"
#include "shared/sqlite/internal/audit.h"
#include "shared/sqlite/internal/db_options.h"
#include "shared/sqlite/internal/history.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/sqlite/schema.h"
#include "shared/sqlite/sqlite_file.h"

namespace outbox::checker {
namespace {

constexpr int kListed = 10;  // payment ids a text line lists per repair

// What each repair does, for the report; what it writes to last_error and
// the history's detail.
const char* Describe(const std::string& target) {
  if (target == kRepairSentWithoutVoucher) {
    return "SENT -> SENDING, due now: recovery delivers it again, accounting books it once";
  }
  if (target == kRepairArchivedWithoutVoucher) {
    return "archived SENT -> back in outbox as SENDING, due now: delivered again, booked once";
  }
  return "FAILED -> SENT: accounting booked it (what its late acknowledgement would do)";
}
const char* Reason(const std::string& target) {
  if (target == kRepairSentWithoutVoucher) return "repaired: SENT without a voucher";
  if (target == kRepairArchivedWithoutVoucher) return "repaired: archived SENT without a voucher";
  return "repaired: FAILED with a voucher, closed SENT";
}

// One line of what an operator should do about a violation the repair
// leaves alone.
std::string WhatToDo(const std::string& check, const std::string& payment_id) {
  if (check == "voucher_without_payment") {
    return "accounting booked a payment that payment.db does not hold (payment.db restored to an "
           "older point?): recover the payment from its client (a retry with its idempotency key "
           "makes it again) or reverse the voucher in accounting";
  }
  if (check == "payment_without_outbox") {
    return absl::StrCat(
        "no outbox row, so accounting is never told: restore the row from a backup "
        "of payment.db; `outboxctl voucher get ",
        payment_id, "` says whether it was booked before the row was lost");
  }
  if (check == "outbox_without_payment") {
    return "an outbox row whose payment payment.db does not hold: restore the payment from a "
           "backup; if accounting booked it, reverse the voucher";
  }
  if (check == "payment_multiple_vouchers") {
    return "booked more than once: keep the voucher whose message_id is the outbox row's and "
           "reverse the others in accounting";
  }
  if (check == "voucher_amount_mismatch") {
    return absl::StrCat(
        "the voucher books another amount or currency than the payment: compare `outboxctl payment "
        "get ",
        payment_id, "` with `outboxctl voucher get ", payment_id,
        "` and correct the booking in accounting");
  }
  if (check == "voucher_message_id_mismatch") {
    return absl::StrCat(
        "booked from another message than the payment's outbox row: find both "
        "message ids in the services' logs (grep payment_id=",
        payment_id, ") and check that the payment was written once");
  }
  if (check == "stale_sending") {
    return "SENDING for longer than --stale_after: check that a recovery_service holds the lease "
           "and accounting consumes (outboxctl stats), then wait or re-drive";
  }
  return "see docs/operations.md, Repair";
}

std::string ProcessedTask(const RepairCandidate& c) {
  return absl::StrCat(
      "accounting.db has processed message ", c.message_id,
      " but holds no voucher for it (the voucher row was deleted), so a delivery would book "
      "nothing: restore the voucher from a backup of accounting.db, or stop accounting_service, "
      "run sqlite_write accounting.db \"DELETE FROM processed_messages WHERE message_id = '",
      c.message_id,
      "'\" (scripts/lib/sqlite.sh), start it and run outbox_check --repair --apply "
      "again");
}

// The columns outbox and outbox_archive share, without id: a row moved back
// to outbox gets a new one (the archive's copy of the old id may be taken).
std::string MovedColumns() {
  return std::string(absl::StripPrefix(absl::StrReplaceAll(kOutboxColumns, {{"o.", ""}}), "id, "));
}

// The statements of one page's transaction, prepared once per page.
class RowRepairer {
 public:
  RowRepairer(SQLite::Database& db, const std::string& actor, int64_t now_ms)
      : table_(db),
        history_(db),
        archived_(db, "SELECT message_id FROM outbox_archive WHERE rowid = ? AND status = 'SENT'"),
        live_(db,
              "SELECT 1 FROM outbox WHERE message_id = ?1 "
              "OR (biz_type = 'payment' AND biz_key = ?2)"),
        move_(db, absl::StrCat("INSERT INTO outbox (", MovedColumns(), ") SELECT ", MovedColumns(),
                               " FROM outbox_archive WHERE rowid = ?")),
        unarchive_(db, "DELETE FROM outbox_archive WHERE rowid = ?"),
        actor_(actor),
        now_ms_(now_ms) {}

  // True when the row changed; false when it is no longer what was read.
  bool Repair(const std::string& target, const RepairCandidate& c) {
    if (target == kRepairArchivedWithoutVoucher && !MoveBack(c)) return false;
    std::optional<OutboxMessage> row = table_.Load(c.message_id);
    if (!row.has_value()) return false;
    if (target == kRepairFailedWithVoucher) {
      if (row->status != OutboxStatus::kFailed) return false;
      OnAck(*row, now_ms_);
    } else if (!OnResend(*row, Reason(target), now_ms_).ok()) {
      return false;  // not SENT any more: acknowledged again, or re-driven
    }
    table_.Save(*row);
    history_.Append(c.message_id, now_ms_, actor_, kEventRepaired, Reason(target));
    return true;
  }

 private:
  // The archived row back into outbox, still SENT; Repair then resends it.
  bool MoveBack(const RepairCandidate& c) {
    archived_.reset();
    archived_.bind(1, c.archive_rowid);
    if (!archived_.executeStep() || archived_.getColumn(0).getString() != c.message_id) {
      return false;  // the archive was rewritten (VACUUM renumbers rowids): read again
    }
    live_.reset();
    live_.bind(1, c.message_id);
    live_.bind(2, c.payment_id);
    if (live_.executeStep()) return false;
    move_.reset();
    move_.bind(1, c.archive_rowid);
    move_.exec();
    unarchive_.reset();
    unarchive_.bind(1, c.archive_rowid);
    unarchive_.exec();
    return true;
  }

  OutboxStateTable table_;
  HistoryLog history_;
  SQLite::Statement archived_;
  SQLite::Statement live_;
  SQLite::Statement move_;
  SQLite::Statement unarchive_;
  const std::string& actor_;
  const int64_t now_ms_;
};

struct Planned {
  const char* target;
  std::vector<const RepairCandidate*> rows;
};

AuditRecord Audit(const RepairOptions& options, const std::string& target, bool dry_run,
                  int64_t rows, std::string outcome, int64_t now_ms) {
  AuditRecord r;
  r.at = now_ms;
  r.actor = options.actor;
  r.action = "repair";
  r.target = target;
  r.dry_run = dry_run;
  r.rows = rows;
  r.outcome = std::move(outcome);
  return r;
}

// payment's database as the repair writes it: a SQLite file or a
// PostgreSQL database, the same rows, history and audit records in each.
class RepairWriter {
 public:
  virtual ~RepairWriter() = default;
  // Runs `body` in one write transaction; it may run again from the start
  // (busy, serialization failure).
  virtual absl::Status Transaction(const std::function<absl::Status()>& body) = 0;
  // Inside Transaction: the row repaired with its history (true), or left
  // alone as no longer what was read (false).
  virtual absl::StatusOr<bool> RepairRow(const std::string& target, const RepairCandidate& c) = 0;
  virtual absl::StatusOr<int64_t> AppendAuditRecord(const AuditRecord& record) = 0;
  virtual absl::Status UpdateAuditRecord(int64_t id, int64_t rows, const std::string& outcome) = 0;
};

class SqliteRepairWriter : public RepairWriter {
 public:
  SqliteRepairWriter(SQLite::Database& db, const std::string& actor, int64_t now_ms)
      : db_(db), actor_(actor), now_ms_(now_ms) {}
  absl::Status Transaction(const std::function<absl::Status()>& body) override {
    return WriteTransaction(db_, [&]() -> absl::Status {
      repairer_.emplace(db_, actor_, now_ms_);  // statements prepared once per transaction
      absl::Status s = body();
      repairer_.reset();
      return s;
    });
  }
  absl::StatusOr<bool> RepairRow(const std::string& target, const RepairCandidate& c) override {
    return repairer_->Repair(target, c);
  }
  absl::StatusOr<int64_t> AppendAuditRecord(const AuditRecord& record) override {
    return AppendAudit(db_, record);
  }
  absl::Status UpdateAuditRecord(int64_t id, int64_t rows, const std::string& outcome) override {
    UpdateAudit(db_, id, rows, outcome);
    return absl::OkStatus();
  }

 private:
  SQLite::Database& db_;
  const std::string& actor_;
  const int64_t now_ms_;
  std::optional<RowRepairer> repairer_;
};

// The same steps on payment's PostgreSQL database (pg_schema.cc's outbox
// tables): the row locked FOR UPDATE, changed by the state machine and
// stored as the library's PostgreSQL stores do, its history and the audit
// record in the same transaction. An archived row is found by its message id.
class PgRepairWriter : public RepairWriter {
 public:
  PgRepairWriter(PgSession& session, const std::string& actor, int64_t now_ms)
      : session_(session), actor_(actor), now_ms_(now_ms) {}
  absl::Status Transaction(const std::function<absl::Status()>& body) override {
    return session_.Transaction("repair", [&](PgConnection& conn) -> absl::Status {
      conn_ = &conn;
      absl::Status s = body();
      conn_ = nullptr;
      return s;
    });
  }
  absl::StatusOr<bool> RepairRow(const std::string& target, const RepairCandidate& c) override {
    if (target == kRepairArchivedWithoutVoucher) {
      absl::StatusOr<bool> moved = MoveBack(c);
      if (!moved.ok() || !*moved) return moved;
    }
    absl::StatusOr<std::map<std::string, OutboxMessage>> rows =
        LockPgOutboxRows(*conn_, {c.message_id});
    if (!rows.ok()) return rows.status();
    auto found = rows->find(c.message_id);
    if (found == rows->end()) return false;
    OutboxMessage& row = found->second;
    if (target == kRepairFailedWithVoucher) {
      if (row.status != OutboxStatus::kFailed) return false;
      OnAck(row, now_ms_);
    } else if (!OnResend(row, Reason(target), now_ms_).ok()) {
      return false;  // not SENT any more: acknowledged again, or re-driven
    }
    if (absl::Status s = SavePgOutboxRow(*conn_, row); !s.ok()) return s;
    if (absl::Status s =
            AppendPgHistory(*conn_, c.message_id, now_ms_, actor_, kEventRepaired, Reason(target));
        !s.ok()) {
      return s;
    }
    return true;
  }
  absl::StatusOr<int64_t> AppendAuditRecord(const AuditRecord& r) override {
    absl::StatusOr<PgResult> id = conn_->Query(
        "INSERT INTO outbox_audit (at, actor, action, target, dry_run, rows, "
        "outcome, reason) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
        {std::to_string(r.at), r.actor, r.action, r.target, r.dry_run ? "1" : "0",
         std::to_string(r.rows), r.outcome, r.reason});
    if (!id.ok()) return id.status();
    int64_t value = 0;
    if (!absl::SimpleAtoi(id->Get(0, 0), &value)) return absl::InternalError("outbox_audit id");
    return value;
  }
  absl::Status UpdateAuditRecord(int64_t id, int64_t rows, const std::string& outcome) override {
    return conn_
        ->Query("UPDATE outbox_audit SET rows = $1, outcome = $2 WHERE id = $3",
                {std::to_string(rows), outcome, std::to_string(id)})
        .status();
  }

 private:
  // The archived row back into outbox, still SENT, with a new id; RepairRow
  // then resends it.
  absl::StatusOr<bool> MoveBack(const RepairCandidate& c) {
    absl::StatusOr<PgResult> archived = conn_->Query(
        "SELECT count(*) FROM outbox_archive WHERE message_id = $1 AND biz_type = 'payment' "
        "AND biz_key = $2 AND status = 'SENT'",
        {c.message_id, c.payment_id});
    if (!archived.ok()) return archived.status();
    if (archived->Get(0, 0) != "1") return false;
    absl::StatusOr<PgResult> live = conn_->Query(
        "SELECT 1 FROM outbox WHERE message_id = $1 OR (biz_type = 'payment' AND biz_key = $2)",
        {c.message_id, c.payment_id});
    if (!live.ok()) return live.status();
    if (live->rows() > 0) return false;
    // The archive's columns are outbox's (pg_schema.cc), read from the
    // catalog so that a column added to both moves with the row.
    absl::StatusOr<PgResult> columns = conn_->Query(
        "SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) FROM pg_attribute "
        "WHERE attrelid = 'outbox_archive'::regclass AND attnum > 0 AND NOT attisdropped "
        "AND attname <> 'id'");
    if (!columns.ok()) return columns.status();
    const std::string list(columns->Get(0, 0));
    absl::StatusOr<PgResult> moved =
        conn_->Query(absl::StrCat("INSERT INTO outbox (", list, ") SELECT ", list,
                                  " FROM outbox_archive WHERE message_id = $1"),
                     {c.message_id});
    if (!moved.ok()) return moved.status();
    absl::StatusOr<PgResult> deleted =
        conn_->Query("DELETE FROM outbox_archive WHERE message_id = $1", {c.message_id});
    if (!deleted.ok()) return deleted.status();
    return true;
  }

  PgSession& session_;
  PgConnection* conn_ = nullptr;
  const std::string& actor_;
  const int64_t now_ms_;
};

// One kind, page by page: each page's rows, their history and the kind's one
// audit record (inserted by the first page, updated by the others) commit
// together, so the record always counts what is committed.
absl::Status ApplyKind(RepairWriter& writer, const Planned& kind, const RepairOptions& options,
                       int64_t now_ms, RepairAction& action, int64_t& audit_records) {
  int64_t audit_id = 0;
  int64_t changed = 0;
  const size_t page = static_cast<size_t>(std::max(options.page_size, 1));
  for (size_t first = 0; first < kind.rows.size(); first += page) {
    const size_t end = std::min(first + page, kind.rows.size());
    std::vector<std::string> page_changed, page_skipped;
    int64_t page_audit_id = audit_id;
    absl::Status s = writer.Transaction([&]() -> absl::Status {
      page_changed.clear();  // a busy attempt runs the body again
      page_skipped.clear();
      page_audit_id = audit_id;
      for (size_t i = first; i < end; ++i) {
        const RepairCandidate& c = *kind.rows[i];
        absl::StatusOr<bool> repaired = writer.RepairRow(kind.target, c);
        if (!repaired.ok()) return repaired.status();
        (*repaired ? page_changed : page_skipped).push_back(c.payment_id);
      }
      const int64_t rows = changed + static_cast<int64_t>(page_changed.size());
      const char* outcome = end == kind.rows.size() ? "ok" : "in progress";
      if (audit_id == 0) {
        absl::StatusOr<int64_t> id = writer.AppendAuditRecord(
            Audit(options, kind.target, /*dry_run=*/false, rows, outcome, now_ms));
        if (!id.ok()) return id.status();
        page_audit_id = *id;
        return absl::OkStatus();
      }
      return writer.UpdateAuditRecord(audit_id, rows, outcome);
    });
    if (!s.ok()) {
      if (audit_id != 0) {  // the record says how far it got, and why it stopped
        writer
            .Transaction([&]() -> absl::Status {
              return writer.UpdateAuditRecord(audit_id, changed, std::string(s.message()));
            })
            .IgnoreError();
      }
      return s;
    }
    if (audit_id == 0) ++audit_records;
    audit_id = page_audit_id;
    changed += static_cast<int64_t>(page_changed.size());
    for (std::string& id : page_changed) action.payment_ids.push_back(std::move(id));
    for (std::string& id : page_skipped) action.skipped.push_back(std::move(id));
  }
  return absl::OkStatus();
}

// Opens payment's database for the repair: a SQLite file of schema version
// kRepairPaymentDbSchemaVersion or newer, or a PostgreSQL database (its
// outbox tables hold outbox_audit and outbox_history from the start).
struct OpenedPaymentDb {
  std::unique_ptr<SQLite::Database> sqlite;
  std::unique_ptr<PgSession> pg;
  std::unique_ptr<RepairWriter> writer;
};

absl::StatusOr<OpenedPaymentDb> OpenForRepair(const CheckConfig& config,
                                              const RepairOptions& options, int64_t now_ms) {
  OpenedPaymentDb opened;
  if (IsPgDatabase(config.payment_db)) {
    PgConnection::Options pg_options;
    pg_options.application_name = "outbox_check";
    absl::StatusOr<std::unique_ptr<PgSession>> session =
        PgSession::Open(config.payment_db, pg_options);
    if (!session.ok()) return session.status();
    opened.pg = *std::move(session);
    opened.writer = std::make_unique<PgRepairWriter>(*opened.pg, options.actor, now_ms);
    return opened;
  }
  DbOptions db_options;
  db_options.create_if_missing = false;
  db_options.busy_timeout_ms = options.busy_timeout_ms;
  absl::StatusOr<std::unique_ptr<SQLite::Database>> db =
      OpenDatabase(config.payment_db, db_options);
  if (!db.ok()) return db.status();
  int version = 0;
  absl::Status read =
      CatchSqlite(absl::StrCat("read the schema version of ", config.payment_db), [&] {
        version = SchemaVersion(**db);
        return absl::OkStatus();
      });
  if (!read.ok()) return read;
  if (version < kRepairPaymentDbSchemaVersion) {
    return absl::FailedPreconditionError(
        absl::StrCat(config.payment_db, " has schema version ", version,
                     "; the repair needs version ", kRepairPaymentDbSchemaVersion,
                     " (outbox_audit, outbox_history, restarted_at): start payment_service once to "
                     "upgrade it"));
  }
  opened.sqlite = *std::move(db);
  opened.writer = std::make_unique<SqliteRepairWriter>(*opened.sqlite, options.actor, now_ms);
  return opened;
}

}  // namespace

bool RepairResult::complete() const {
  return tasks.empty() && tasks_not_listed == 0;
}

absl::StatusOr<RepairResult> Repair(const CheckConfig& config, const Report& report,
                                    const RepairCandidates& candidates,
                                    const RepairOptions& options, absl::Time now) {
  RepairResult result;
  result.applied = options.apply;
  for (const CheckResult& c : report.checks) {
    // The two that are repaired come from the candidates, every row of them.
    if (!c.failed() || c.name == kRepairSentWithoutVoucher || c.name == kRepairFailedWithVoucher) {
      continue;
    }
    for (const std::string& id : c.examples)
      result.tasks.push_back({c.name, id, WhatToDo(c.name, id)});
    result.tasks_not_listed += c.count - static_cast<int64_t>(c.examples.size());
  }

  Planned sent{kRepairSentWithoutVoucher, {}};
  Planned archived{kRepairArchivedWithoutVoucher, {}};
  Planned failed{kRepairFailedWithVoucher, {}};
  for (const RepairCandidate& c : candidates.sent_without_voucher) {
    if (c.processed) {
      result.tasks.push_back({kRepairSentWithoutVoucher, c.payment_id, ProcessedTask(c)});
    } else if (c.live_row) {
      result.tasks.push_back(
          {kRepairSentWithoutVoucher, c.payment_id,
           absl::StrCat("archived message ", c.message_id,
                        " has a row in outbox as well, so it is not moved back: compare the two "
                        "(sqlite3 -readonly payment.db) and keep the one in outbox")});
    } else {
      (c.archive_rowid > 0 ? archived : sent).rows.push_back(&c);
    }
  }
  for (const RepairCandidate& c : candidates.failed_with_voucher) failed.rows.push_back(&c);

  std::vector<Planned> kinds;
  for (Planned* kind : {&sent, &archived, &failed}) {
    if (!kind->rows.empty()) kinds.push_back(std::move(*kind));
  }
  if (kinds.empty()) return result;  // nothing to change: nothing written, not even an audit

  const int64_t now_ms = absl::ToUnixMillis(now);
  absl::StatusOr<OpenedPaymentDb> db = OpenForRepair(config, options, now_ms);
  if (!db.ok()) return db.status();
  RepairWriter& writer = *db->writer;
  if (!options.apply) {
    absl::Status s = writer.Transaction([&]() -> absl::Status {
      for (const Planned& kind : kinds) {
        absl::StatusOr<int64_t> id =
            writer.AppendAuditRecord(Audit(options, kind.target, /*dry_run=*/true,
                                           static_cast<int64_t>(kind.rows.size()), "ok", now_ms));
        if (!id.ok()) return id.status();
      }
      return absl::OkStatus();
    });
    if (!s.ok()) return s;
    for (const Planned& kind : kinds) {
      RepairAction action;
      action.target = kind.target;
      for (const RepairCandidate* c : kind.rows) action.payment_ids.push_back(c->payment_id);
      result.actions.push_back(std::move(action));
    }
    result.audit_records = static_cast<int64_t>(kinds.size());
    return result;
  }

  for (const Planned& kind : kinds) {
    RepairAction action;
    action.target = kind.target;
    absl::Status s = ApplyKind(writer, kind, options, now_ms, action, result.audit_records);
    if (!s.ok()) return s;
    for (const std::string& id : action.skipped) {
      result.tasks.push_back(
          {kind.target, id,
           "changed while the repair ran (acknowledged, re-driven or archived meanwhile): run "
           "outbox_check again"});
    }
    result.actions.push_back(std::move(action));
  }
  return result;
}

std::string FormatRepairText(const RepairResult& r) {
  std::string out =
      r.applied ? "repair: applied\n" : "repair: dry run, nothing changed (--apply changes it)\n";
  for (const RepairAction& a : r.actions) {
    absl::StrAppendFormat(&out, "  %-13s %-26s %8d  %s\n", r.applied ? "repaired" : "would repair",
                          a.target, a.payment_ids.size(), Describe(a.target));
    if (!a.payment_ids.empty()) {
      const size_t listed = std::min<size_t>(a.payment_ids.size(), kListed);
      absl::StrAppend(&out, "       payment_id: ",
                      absl::StrJoin(a.payment_ids.begin(), a.payment_ids.begin() + listed, ", "),
                      a.payment_ids.size() > listed ? ", ..." : "", "\n");
    }
    if (!a.skipped.empty()) {
      absl::StrAppendFormat(&out, "  %-13s %-26s %8d  changed meanwhile, left alone\n", "skipped",
                            a.target, a.skipped.size());
    }
  }
  if (r.actions.empty()) absl::StrAppend(&out, "  nothing to repair\n");
  if (r.audit_records > 0) {
    absl::StrAppend(&out, "  audit: ", r.audit_records, " record(s) in outbox_audit (dry_run ",
                    r.applied ? 0 : 1, ")\n");
  }
  if (!r.tasks.empty() || r.tasks_not_listed > 0) {
    absl::StrAppend(&out, "operator tasks (the repair cannot fix these):\n");
    for (const OperatorTask& t : r.tasks) {
      absl::StrAppendFormat(&out, "  %s %s: %s\n", t.check, t.payment_id, t.what_to_do);
    }
    if (r.tasks_not_listed > 0) {
      absl::StrAppend(&out, "  ... and ", r.tasks_not_listed,
                      " more of the checks above (only their examples are listed): the same for "
                      "each\n");
    }
  }
  if (!r.complete()) {
    absl::StrAppend(&out, "repair result: OPERATOR NEEDED\n");
  } else if (r.actions.empty()) {
    absl::StrAppend(&out, "repair result: OK, nothing to repair\n");
  } else {
    absl::StrAppend(&out, r.applied ? "repair result: OK, every violation repaired\n"
                                    : "repair result: OK, --apply would repair every violation\n");
  }
  return out;
}

namespace {
std::string JsonList(const std::vector<std::string>& items) {
  std::vector<std::string> quoted;
  for (const std::string& s : items) quoted.push_back(JsonString(s));
  return absl::StrCat("[", absl::StrJoin(quoted, ", "), "]");
}
}  // namespace

std::string FormatRepairJson(const RepairResult& r) {
  std::vector<std::string> actions, tasks;
  for (const RepairAction& a : r.actions) {
    actions.push_back(absl::StrFormat(
        "{\"target\": %s, \"rows\": %d, \"payment_ids\": %s, \"skipped\": %s}",
        JsonString(a.target), a.payment_ids.size(), JsonList(a.payment_ids), JsonList(a.skipped)));
  }
  for (const OperatorTask& t : r.tasks) {
    tasks.push_back(absl::StrFormat("{\"check\": %s, \"payment_id\": %s, \"what_to_do\": %s}",
                                    JsonString(t.check), JsonString(t.payment_id),
                                    JsonString(t.what_to_do)));
  }
  return absl::StrFormat(
      "{\"applied\": %s, \"actions\": [%s], \"tasks\": [%s], \"tasks_not_listed\": %d, "
      "\"audit_records\": %d, \"complete\": %s}",
      r.applied ? "true" : "false", absl::StrJoin(actions, ", "), absl::StrJoin(tasks, ", "),
      r.tasks_not_listed, r.audit_records, r.complete() ? "true" : "false");
}

int RunRepairAndPrint(const CheckConfig& config, const RepairOptions& options, absl::Time now,
                      bool json, std::ostream& out, std::ostream& err) {
  absl::StatusOr<Report> report = RunChecks(config, now);
  if (!report.ok()) {
    err << "outbox_check: " << report.status().message() << "\n";
    return kExitError;
  }
  absl::StatusOr<RepairCandidates> candidates = FindRepairCandidates(config);
  if (!candidates.ok()) {
    err << "outbox_check: " << candidates.status().message() << "\n";
    return kExitError;
  }
  absl::StatusOr<RepairResult> result = Repair(config, *report, *candidates, options, now);
  if (!result.ok()) {
    out << (json ? FormatJson(*report) : FormatText(*report));
    err << "outbox_check: repair: " << result.status().message() << "\n";
    return kExitError;
  }
  if (json) {
    // The report's object with the repair's added: {..., "ok": ..., "repair": {...}}.
    std::string object = FormatJson(*report);
    object.resize(object.rfind('}'));
    out << object << ", \"repair\": " << FormatRepairJson(*result) << "}\n";
  } else {
    out << FormatText(*report) << FormatRepairText(*result);
  }
  return result->complete() ? kExitOk : kExitViolation;
}

}  // namespace outbox::checker
