#include "shared/sqlite/inbox.h"

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"

namespace outbox {
namespace {

std::string IndexOf(const InboxTable& t) {
  return absl::StrCat(t.table, "_processed_at");
}

}  // namespace

DbSchema ConsumerSchema(std::string tables, const InboxTable& table) {
  return DbSchema{{{"the adopter's tables and the inbox", [tables, table](SQLite::Database& db) {
                      db.exec(tables);
                      CreateInboxTable(db, table);
                    }}}};
}

void CreateInboxTable(SQLite::Database& db, const InboxTable& t) {
  db.exec(absl::StrCat("CREATE TABLE IF NOT EXISTS ", t.table, " (message_id TEXT PRIMARY KEY, ",
                       t.key_column, " TEXT NOT NULL, ", t.reference_column,
                       " TEXT NOT NULL, processed_at INTEGER NOT NULL) WITHOUT ROWID"));
  db.exec(
      absl::StrCat("CREATE INDEX IF NOT EXISTS ", IndexOf(t), " ON ", t.table, " (processed_at)"));
}

Inbox::Inbox(SQLite::Database& db, const InboxTable& t)
    : find_(db, absl::StrCat("SELECT ", t.reference_column, " FROM ", t.table,
                             " WHERE message_id = ?")),
      record_(db, absl::StrCat("INSERT INTO ", t.table, " (message_id, ", t.key_column, ", ",
                               t.reference_column, ", processed_at) VALUES (?, ?, ?, ?)")) {}

std::optional<std::string> Inbox::Find(const std::string& message_id) {
  find_.tryReset();
  find_.bind(1, message_id);
  std::optional<std::string> reference;
  if (find_.executeStep()) reference = find_.getColumn(0).getString();
  find_.reset();
  return reference;
}

void Inbox::Record(const std::string& message_id, const std::string& biz_key,
                   const std::string& reference, int64_t processed_at_ms) {
  record_.tryReset();  // after a failed insert reset() would rethrow its error
  record_.bind(1, message_id);
  record_.bind(2, biz_key);
  record_.bind(3, reference);
  record_.bind(4, static_cast<int64_t>(processed_at_ms));
  record_.exec();
  record_.reset();
}

bool InboxHasOlderThan(SQLite::Database& db, const InboxTable& t, int64_t cutoff_ms) {
  SQLite::Statement s(db, absl::StrCat("SELECT 1 FROM ", t.table, " INDEXED BY ", IndexOf(t),
                                       " WHERE processed_at < ? LIMIT 1"));
  s.bind(1, static_cast<int64_t>(cutoff_ms));
  return s.executeStep();
}

int PruneInbox(SQLite::Database& db, const InboxTable& t, int64_t cutoff_ms, int limit) {
  // A bounded batch per transaction, so the consumer's next batch waits
  // for one short delete at most.
  SQLite::Statement del(
      db, absl::StrCat("DELETE FROM ", t.table, " WHERE message_id IN (", "SELECT message_id FROM ",
                       t.table, " INDEXED BY ", IndexOf(t), " WHERE processed_at < ?1 ",
                       "ORDER BY processed_at LIMIT ?2)"));
  del.bind(1, static_cast<int64_t>(cutoff_ms));
  del.bind(2, limit);
  return del.exec();
}

absl::StatusOr<int> SqliteProcessedLog::PruneProcessed(int64_t cutoff_ms, int limit) {
  bool due = false;
  RETURN_IF_ERROR(file_.Read("find processed ids to prune", [&](SQLite::Database& reader) {
    due = InboxHasOlderThan(reader, table_, cutoff_ms);
    return absl::OkStatus();
  }));
  if (!due) return 0;
  int pruned = 0;
  RETURN_IF_ERROR(file_.Write([&](SQLite::Database& writer) {
    pruned = PruneInbox(writer, table_, cutoff_ms, limit);
    return absl::OkStatus();
  }));
  return pruned;
}

}  // namespace outbox
