#pragma once

// The outbox table in payment.db, shared by payment_service (writes rows,
// marks them SENT) and recovery_service (claims due rows, fails, re-drives).
#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include "absl/status/statusor.h"

namespace outbox {

enum class OutboxStatus { kSending = 1, kSent = 2, kFailed = 3 };

absl::string_view StatusName(OutboxStatus status);
absl::StatusOr<OutboxStatus> ParseStatus(absl::string_view name);

struct OutboxRow {
  int64_t id = 0;
  std::string message_id;
  std::string biz_type;
  std::string biz_key;
  std::string topic;
  std::string payload;
  OutboxStatus status = OutboxStatus::kSending;
  int attempts = 0;
  int max_attempts = 0;
  int64_t next_retry_at = 0;    // unix ms
  int64_t last_attempt_at = 0;  // unix ms, 0 = never
  std::string last_error;
  int64_t created_at = 0;
  int64_t updated_at = 0;
  int64_t sent_at = 0;  // 0 = not sent
};

// Column list matching ReadOutboxRow, for SELECTs (table alias "o").
extern const char* const kOutboxColumns;

// Creates the outbox table, its (status, next_retry_at) index and the
// recovery lease table if missing. Throws SQLite::Exception.
void CreateOutboxSchema(SQLite::Database& db);

// Inserts rows with one prepared statement. Throws SQLite::Exception; use
// inside the caller's transaction.
class OutboxInserter {
 public:
  explicit OutboxInserter(SQLite::Database& db);
  void Insert(const OutboxRow& row);

 private:
  SQLite::Statement stmt_;
};

// One row (prepares a statement each time: for tests and tools).
void InsertOutboxRow(SQLite::Database& db, const OutboxRow& row);

// Reads the columns of kOutboxColumns starting at column `first`.
OutboxRow ReadOutboxRow(SQLite::Statement& stmt, int first = 0);

// Marks SENDING rows SENT. Returns how many changed; unknown, already SENT
// and FAILED ids are ignored: a FAILED row has been alerted on and leaves
// that state only through an operator's re-drive (its re-publish is then
// answered as a duplicate and the row turns SENT).
// Throws SQLite::Exception; call inside the caller's transaction.
int MarkOutboxSent(SQLite::Database& db, const std::vector<std::string>& message_ids,
                   int64_t now_ms);

// Notes why a publish failed on SENDING rows (last_error). Throws
// SQLite::Exception; call inside the caller's transaction.
void RecordOutboxError(SQLite::Database& db, const std::vector<std::string>& message_ids,
                       const std::string& error, int64_t now_ms);

}  // namespace outbox
