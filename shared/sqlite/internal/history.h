#pragma once

// Each message's history: what happened to it beyond "published once,
// acknowledged" (the row itself says that much). Retries, their failures,
// rejects, expiry and operator actions are appended, with the time and the
// instance or operator, in the transaction that changes the row; the happy
// path writes nothing. Kept for the newest kHistoryPerMessage events of a
// message, deleted with the row when it is archived. Everything throws
// SQLite::Exception and runs inside the caller's transaction.
#include <cstdint>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include "shared/outbox/internal/history_events.h"       // kEvent*, kHistoryPerMessage
#include "shared/outbox/internal/operator_repository.h"  // HistoryEvent

namespace outbox {

// Appends events with statements prepared once (the transaction's owner
// keeps one per transaction or longer).
class HistoryLog {
 public:
  explicit HistoryLog(SQLite::Database& db);
  void Append(const std::string& message_id, int64_t at_ms, const std::string& instance,
              const std::string& event, const std::string& detail = "");

 private:
  SQLite::Statement insert_;
  SQLite::Statement trim_;
};

// A message's events, oldest first.
std::vector<HistoryEvent> ReadHistory(SQLite::Database& db, const std::string& message_id);

// Deletes the events of these messages (their rows are being archived).
void DeleteHistory(SQLite::Database& db, const std::vector<std::string>& message_ids);

// Rows in outbox_history (the happy path's bench checks it stays 0).
int64_t CountHistory(SQLite::Database& db);

}  // namespace outbox
