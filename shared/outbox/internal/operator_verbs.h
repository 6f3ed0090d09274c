#pragma once

// The operator's verbs decided once for every store (OperatorRepository,
// operator_repository.h): the audit record each verb writes, which FAILED
// rows a group re-drive or acknowledgement takes, the transitions
// (state_machine.h), the paged walk over FAILED rows with its audit record
// kept in step, and the history events. A store gives the row I/O of one
// transaction (OperatorTransaction) and runs it (InTransaction); listings,
// counts, history and the audit trail stay its own.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/observability/log.h"
#include "shared/outbox/internal/failure.h"
#include "shared/outbox/internal/history_events.h"
#include "shared/outbox/internal/operator_repository.h"
#include "shared/outbox/internal/state_machine.h"
#include "shared/outbox/message.h"

namespace outbox {

// The row I/O of one transaction of an operator's change.
class OperatorTransaction {
 public:
  virtual ~OperatorTransaction() = default;
  // The outbox row `message_id`, locked for the change; nullopt when none.
  virtual absl::StatusOr<std::optional<OutboxMessage>> Load(const std::string& message_id) = 0;
  // Up to `limit` FAILED rows of `group` ("" = all) with ids above
  // `after_id`, in id order, locked for the change.
  virtual absl::StatusOr<std::vector<OutboxMessage>> FailedRows(const std::string& group,
                                                                int64_t after_id, int limit) = 0;
  virtual absl::Status Save(const OutboxMessage& row) = 0;
  virtual absl::Status AppendHistory(const std::string& message_id, int64_t at_ms,
                                     const std::string& instance, const char* event,
                                     const std::string& detail) = 0;
  // The new record's id.
  virtual absl::StatusOr<int64_t> AppendAudit(const AuditRecord& audit) = 0;
  virtual absl::Status UpdateAudit(int64_t id, int64_t rows, const std::string& outcome) = 0;
};

class OperatorVerbs : public OperatorRepository {
 public:
  absl::StatusOr<OutboxMessage> Redrive(const std::string& message_id, int64_t now_ms,
                                        const std::string& actor,
                                        const std::string& reason = "") override {
    return ChangeOneRow(
        message_id, now_ms, {0, now_ms, actor, "redrive_message", message_id, false, 0, "", reason},
        [&](OutboxMessage& row) { return OnRedrive(row, now_ms); }, kEventRedriven,
        absl::StrCat("by ", actor));
  }

  absl::StatusOr<int64_t> RedriveFailed(const std::string& group, bool dry_run, int64_t now_ms,
                                        const std::string& actor, int page = 1000,
                                        bool include_rejected_and_acknowledged = false,
                                        const std::string& reason = "") override {
    const bool everything = !group.empty() || include_rejected_and_acknowledged;
    const AuditRecord audit{0,
                            now_ms,
                            actor,
                            group.empty() ? "redrive_all" : "redrive_group",
                            !group.empty() ? group
                            : include_rejected_and_acknowledged
                                ? "FAILED (rejected and acknowledged too)"
                                : "FAILED",
                            dry_run,
                            0,
                            "",
                            reason};
    return ChangeFailedRows(
        group, dry_run, now_ms, audit, page,
        [&](OutboxMessage& row) {
          if (!everything &&
              (row.failure_kind == kFailureRejected || !row.acknowledged_by.empty())) {
            return false;  // left FAILED on purpose
          }
          return OnRedrive(row, now_ms).ok();
        },
        kEventRedriven,
        absl::StrCat("by ", actor, group.empty() ? " (all FAILED)" : " (group " + group + ")"));
  }

  absl::StatusOr<OutboxMessage> AcknowledgeFailure(const std::string& message_id, int64_t now_ms,
                                                   const std::string& actor,
                                                   const std::string& reason = "") override {
    return ChangeOneRow(
        message_id, now_ms,
        {0, now_ms, actor, "acknowledge_message", message_id, false, 0, "", reason},
        [&](OutboxMessage& row) { return OnAcknowledgeFailure(row, actor, now_ms); },
        kEventFailureSeen, absl::StrCat("by ", actor));
  }

  absl::StatusOr<int64_t> AcknowledgeGroup(const std::string& group, bool dry_run, int64_t now_ms,
                                           const std::string& actor, int page = 1000,
                                           const std::string& reason = "") override {
    if (group.empty()) return absl::InvalidArgumentError("a failure group is required");
    const AuditRecord audit{0, now_ms, actor, "acknowledge_group", group, dry_run, 0, "", reason};
    return ChangeFailedRows(
        group, dry_run, now_ms, audit, page,
        [&](OutboxMessage& row) {
          return row.acknowledged_by.empty() && OnAcknowledgeFailure(row, actor, now_ms).ok();
        },
        kEventFailureSeen, absl::StrCat("by ", actor, " (group ", group, ")"));
  }

  absl::Status RecordAudit(const AuditRecord& audit) override {
    absl::Status s = InTransaction(
        "record audit", [&](OperatorTransaction& tx) { return tx.AppendAudit(audit).status(); });
    if (!s.ok()) {
      LogError("audit_not_recorded",
               {KV("actor", audit.actor), KV("action", audit.action), KV("target", audit.target),
                KV("outcome", audit.outcome), KV("error", s.message())});
    }
    return s;
  }

 protected:
  // Runs `body` in one transaction named `what`; it may run more than once
  // (a busy database, a serialization failure) and commits when it returns OK.
  virtual absl::Status InTransaction(
      const std::string& what, const std::function<absl::Status(OperatorTransaction&)>& body) = 0;

 private:
  // Records an action that failed, in a transaction of its own.
  void AuditFailure(AuditRecord audit, const absl::Status& why) {
    audit.outcome = std::string(why.message());
    audit.rows = 0;
    // The action's own error is what the caller reports; a failure to record
    // it is logged by RecordAudit.
    RecordAudit(audit).IgnoreError();
  }

  // One row's operator change, audited.
  absl::StatusOr<OutboxMessage> ChangeOneRow(
      const std::string& message_id, int64_t now_ms, const AuditRecord& audit,
      const std::function<absl::Status(OutboxMessage&)>& change, const char* event,
      const std::string& detail) {
    OutboxMessage changed;
    absl::Status s = InTransaction(audit.action, [&](OperatorTransaction& tx) -> absl::Status {
      OUTBOX_ASSIGN_OR_RETURN(std::optional<OutboxMessage> row, tx.Load(message_id));
      if (!row.has_value()) {
        return absl::NotFoundError(absl::StrCat("message '", message_id, "' not found"));
      }
      OUTBOX_RETURN_IF_ERROR(change(*row));
      OUTBOX_RETURN_IF_ERROR(tx.Save(*row));
      OUTBOX_RETURN_IF_ERROR(tx.AppendHistory(message_id, now_ms, audit.actor, event, detail));
      AuditRecord done = audit;
      done.rows = 1;
      done.outcome = "ok";
      OUTBOX_RETURN_IF_ERROR(tx.AppendAudit(done).status());
      changed = *std::move(row);
      return absl::OkStatus();
    });
    if (!s.ok()) {
      AuditFailure(audit, s);
      return s;
    }
    return changed;
  }

  // Applies `change` (true: changed) to FAILED rows of `group` ("" = all),
  // `page` rows per transaction, with the audit record kept in step.
  absl::StatusOr<int64_t> ChangeFailedRows(const std::string& group, bool dry_run, int64_t now_ms,
                                           const AuditRecord& audit, int page,
                                           const std::function<bool(OutboxMessage&)>& change,
                                           const char* event, const std::string& detail) {
    if (page < 1) return absl::InvalidArgumentError("page must be at least 1");
    int64_t total = 0;
    int64_t audit_id = 0;
    int64_t after_id = 0;  // rows are walked by id: a changed row leaves the set or stays behind
    while (true) {
      // The body may run again: what it learns stays in these until the
      // page commits.
      int64_t in_page = 0;
      int64_t page_after_id = after_id;
      int64_t page_audit_id = audit_id;
      bool last = false;
      absl::Status s = InTransaction(audit.action, [&](OperatorTransaction& tx) -> absl::Status {
        in_page = 0;
        page_after_id = after_id;
        page_audit_id = audit_id;
        OUTBOX_ASSIGN_OR_RETURN(std::vector<OutboxMessage> rows,
                                tx.FailedRows(group, after_id, page));
        last = static_cast<int>(rows.size()) < page;
        for (OutboxMessage& row : rows) {
          page_after_id = row.id;
          if (!change(row)) continue;
          ++in_page;
          if (dry_run) continue;
          OUTBOX_RETURN_IF_ERROR(tx.Save(row));
          OUTBOX_RETURN_IF_ERROR(
              tx.AppendHistory(row.message_id, now_ms, audit.actor, event, detail));
        }
        const std::string outcome = last ? "ok" : "in progress";
        if (page_audit_id == 0) {
          AuditRecord first = audit;
          first.rows = total + in_page;
          first.outcome = outcome;
          OUTBOX_ASSIGN_OR_RETURN(page_audit_id, tx.AppendAudit(first));
          return absl::OkStatus();
        }
        return tx.UpdateAudit(page_audit_id, total + in_page, outcome);
      });
      if (!s.ok()) {
        // Nothing of the page committed, its audit record included: a first
        // page's failure is recorded on its own.
        if (audit_id == 0) {
          AuditFailure(audit, s);
        } else {
          absl::Status recorded = InTransaction("record audit", [&](OperatorTransaction& tx) {
            return tx.UpdateAudit(audit_id, total,
                                  absl::StrCat("stopped after ", total, " rows: ", s.message()));
          });
          if (!recorded.ok()) {
            LogError("audit_not_recorded", {KV("actor", audit.actor), KV("action", audit.action),
                                            KV("target", audit.target), KV("outcome", s.message()),
                                            KV("error", recorded.message())});
          }
        }
        return s;
      }
      after_id = page_after_id;
      audit_id = page_audit_id;
      total += in_page;
      if (last) return total;
    }
  }
};

}  // namespace outbox
