#include "shared/sqlite/internal/audit.h"

namespace outbox {

int64_t AppendAudit(SQLite::Database& db, const AuditRecord& r) {
  SQLite::Statement stmt(db,
                         "INSERT INTO outbox_audit (at, actor, action, target, dry_run, rows, "
                         "outcome, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?)");
  stmt.bind(1, static_cast<int64_t>(r.at));
  stmt.bind(2, r.actor);
  stmt.bind(3, r.action);
  stmt.bind(4, r.target);
  stmt.bind(5, r.dry_run ? 1 : 0);
  stmt.bind(6, static_cast<int64_t>(r.rows));
  stmt.bind(7, r.outcome);
  stmt.bind(8, r.reason);
  stmt.exec();
  return db.getLastInsertRowid();
}

void UpdateAudit(SQLite::Database& db, int64_t id, int64_t rows, const std::string& outcome) {
  SQLite::Statement stmt(db, "UPDATE outbox_audit SET rows = ?, outcome = ? WHERE id = ?");
  stmt.bind(1, static_cast<int64_t>(rows));
  stmt.bind(2, outcome);
  stmt.bind(3, static_cast<int64_t>(id));
  stmt.exec();
}

std::vector<AuditRecord> ListAudit(SQLite::Database& db, int64_t before_id, int limit) {
  SQLite::Statement stmt(db,
                         "SELECT id, at, actor, action, target, dry_run, rows, outcome, reason "
                         "FROM outbox_audit WHERE id < ? ORDER BY id DESC LIMIT ?");
  stmt.bind(1, static_cast<int64_t>(before_id > 0 ? before_id : INT64_MAX));
  stmt.bind(2, limit);
  std::vector<AuditRecord> records;
  while (stmt.executeStep()) {
    AuditRecord r;
    r.id = stmt.getColumn(0).getInt64();
    r.at = stmt.getColumn(1).getInt64();
    r.actor = stmt.getColumn(2).getString();
    r.action = stmt.getColumn(3).getString();
    r.target = stmt.getColumn(4).getString();
    r.dry_run = stmt.getColumn(5).getInt() != 0;
    r.rows = stmt.getColumn(6).getInt64();
    r.outcome = stmt.getColumn(7).getString();
    r.reason = stmt.getColumn(8).getString();
    records.push_back(std::move(r));
  }
  return records;
}

}  // namespace outbox
