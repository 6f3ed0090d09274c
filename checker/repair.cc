#include "checker/repair.h"

#include <SQLiteCpp/SQLiteCpp.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "checker/report.h"
#include "shared/outbox/internal/state_machine.h"
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

// One kind, page by page: each page's rows, their history and the kind's one
// audit record (inserted by the first page, updated by the others) commit
// together, so the record always counts what is committed.
absl::Status ApplyKind(SQLite::Database& db, const Planned& kind, const RepairOptions& options,
                       int64_t now_ms, RepairAction& action, int64_t& audit_records) {
  int64_t audit_id = 0;
  int64_t changed = 0;
  const size_t page = static_cast<size_t>(std::max(options.page_size, 1));
  for (size_t first = 0; first < kind.rows.size(); first += page) {
    const size_t end = std::min(first + page, kind.rows.size());
    std::vector<std::string> page_changed, page_skipped;
    int64_t page_audit_id = audit_id;
    absl::Status s = WriteTransaction(db, [&]() -> absl::Status {
      page_changed.clear();  // a busy attempt runs the body again
      page_skipped.clear();
      RowRepairer repairer(db, options.actor, now_ms);
      for (size_t i = first; i < end; ++i) {
        const RepairCandidate& c = *kind.rows[i];
        (repairer.Repair(kind.target, c) ? page_changed : page_skipped).push_back(c.payment_id);
      }
      const int64_t rows = changed + static_cast<int64_t>(page_changed.size());
      const char* outcome = end == kind.rows.size() ? "ok" : "in progress";
      if (audit_id == 0) {
        page_audit_id =
            AppendAudit(db, Audit(options, kind.target, /*dry_run=*/false, rows, outcome, now_ms));
      } else {
        UpdateAudit(db, audit_id, rows, outcome);
      }
      return absl::OkStatus();
    });
    if (!s.ok()) {
      if (audit_id != 0) {  // the record says how far it got, and why it stopped
        WriteTransaction(db, [&]() -> absl::Status {
          UpdateAudit(db, audit_id, changed, std::string(s.message()));
          return absl::OkStatus();
        }).IgnoreError();
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

  const int64_t now_ms = absl::ToUnixMillis(now);
  if (!options.apply) {
    absl::Status s = WriteTransaction(**db, [&]() -> absl::Status {
      for (const Planned& kind : kinds) {
        AppendAudit(**db, Audit(options, kind.target, /*dry_run=*/true,
                                static_cast<int64_t>(kind.rows.size()), "ok", now_ms));
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
    absl::Status s = ApplyKind(**db, kind, options, now_ms, action, result.audit_records);
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
