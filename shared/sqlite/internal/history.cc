#include "shared/sqlite/internal/history.h"

#include "absl/strings/str_cat.h"

namespace outbox {

HistoryLog::HistoryLog(SQLite::Database& db)
    : insert_(db,
              "INSERT INTO outbox_history (message_id, at, instance, event, detail) "
              "VALUES (?, ?, ?, ?, ?)"),
      trim_(db, absl::StrCat("DELETE FROM outbox_history WHERE message_id = ?1 AND id <= ("
                             "SELECT id FROM outbox_history WHERE message_id = ?1 "
                             "ORDER BY id DESC LIMIT 1 OFFSET ",
                             kHistoryPerMessage, ")")) {}

void HistoryLog::Append(const std::string& message_id, int64_t at_ms, const std::string& instance,
                        const std::string& event, const std::string& detail) {
  insert_.tryReset();
  insert_.bind(1, message_id);
  insert_.bind(2, static_cast<int64_t>(at_ms));
  insert_.bind(3, instance);
  insert_.bind(4, event);
  insert_.bind(5, detail);
  insert_.exec();
  trim_.tryReset();
  trim_.bind(1, message_id);
  trim_.exec();
}

std::vector<HistoryEvent> ReadHistory(SQLite::Database& db, const std::string& message_id) {
  SQLite::Statement stmt(db,
                         "SELECT id, message_id, at, instance, event, detail FROM outbox_history "
                         "WHERE message_id = ? ORDER BY id");
  stmt.bind(1, message_id);
  std::vector<HistoryEvent> events;
  while (stmt.executeStep()) {
    events.push_back({stmt.getColumn(0).getInt64(), stmt.getColumn(1).getString(),
                      stmt.getColumn(2).getInt64(), stmt.getColumn(3).getString(),
                      stmt.getColumn(4).getString(), stmt.getColumn(5).getString()});
  }
  return events;
}

void DeleteHistory(SQLite::Database& db, const std::vector<std::string>& message_ids) {
  SQLite::Statement del(db, "DELETE FROM outbox_history WHERE message_id = ?");
  for (const std::string& id : message_ids) {
    del.reset();
    del.bind(1, id);
    del.exec();
  }
}

int64_t CountHistory(SQLite::Database& db) {
  SQLite::Statement stmt(db, "SELECT count(*) FROM outbox_history");
  return stmt.executeStep() ? stmt.getColumn(0).getInt64() : 0;
}

}  // namespace outbox
