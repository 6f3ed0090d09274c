#pragma once

// The audit trail of operator actions: every call that changes rows
// (re-drive one, a group or all; acknowledge; repair), and every one that
// tried and failed, with who, when, what, how many rows, the outcome and
// the operator's reason.
// A change and its record commit in the same transaction; a change made in
// pages updates its one record in each page's transaction, so the record
// always counts what is committed. Records are kept until the audit
// retention deletes them (RecoveryStore::PruneAudit). Throws
// SQLite::Exception; runs inside the caller's transaction.
#include <cstdint>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

namespace outbox {

struct AuditRecord {
  int64_t id = 0;
  int64_t at = 0;      // unix ms
  std::string actor;   // the bearer token's name, the client certificate's subject, ...
  std::string action;  // "redrive_message", "redrive_group", "redrive_all",
                       // "acknowledge_message", "acknowledge_group", "repair",
                       // "redrive_dead_letters", "remove_settled_dead_letter" (actor
                       // "recovery": its housekeeping)
  std::string target;  // a message id, a failure group, "FAILED", ...
  bool dry_run = false;
  int64_t rows = 0;     // rows changed (or that would be, dry run)
  std::string outcome;  // "ok", "in progress" (a paged change not finished) or the error
  std::string reason;   // why, in the operator's words ("" when none was given)
};

// Inserts `record`; returns its id.
int64_t AppendAudit(SQLite::Database& db, const AuditRecord& record);
// Sets the rows and outcome of record `id` (a paged change's progress).
void UpdateAudit(SQLite::Database& db, int64_t id, int64_t rows, const std::string& outcome);
// Records newest first, those with an id below `before_id` (0: from the newest).
std::vector<AuditRecord> ListAudit(SQLite::Database& db, int64_t before_id, int limit);

}  // namespace outbox
