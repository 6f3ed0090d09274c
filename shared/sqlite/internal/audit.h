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

#include "shared/outbox/internal/operator_repository.h"  // AuditRecord

namespace outbox {

// Inserts `record`; returns its id.
int64_t AppendAudit(SQLite::Database& db, const AuditRecord& record);
// Sets the rows and outcome of record `id` (a paged change's progress).
void UpdateAudit(SQLite::Database& db, int64_t id, int64_t rows, const std::string& outcome);
// Records newest first, those with an id below `before_id` (0: from the newest).
std::vector<AuditRecord> ListAudit(SQLite::Database& db, int64_t before_id, int limit);

}  // namespace outbox
