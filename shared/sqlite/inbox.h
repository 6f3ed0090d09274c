#pragma once

// A consumer's inbox in SQLite: the ids of the messages it has applied, each
// with the business key and the reference of what it made, written in the
// same transaction as the change the message caused. A message id found here
// is a duplicate: nothing is applied again and the reply names the same
// reference. Pruned by age (ProcessedLog, inbox_pruner.h) once no copy can
// still arrive.
//
// Everything throws SQLite::Exception and runs inside the caller's
// transaction, on the connection it was made with.
#include <cstdint>
#include <optional>
#include <string>

#include <SQLiteCpp/SQLiteCpp.h>

#include "absl/status/statusor.h"
#include "shared/outbox/repository.h"
#include "shared/sqlite/sqlite_file.h"

namespace outbox {

// Where the inbox lives: the table and the names of its two value columns.
struct InboxTable {
  std::string table = "inbox";
  std::string key_column = "biz_key";          // the business key the message was about
  std::string reference_column = "reference";  // what applying it made
};

// Creates the table and its index on processed_at (the pruner walks it),
// unless they are there. A consumer calls it in a migration of its schema.
void CreateInboxTable(SQLite::Database& db, const InboxTable& table = {});

// A consumer's schema in one call: its migration 1 runs `tables` (the
// adopter's CREATE statements, several separated by ';') and
// CreateInboxTable in one transaction. Later versions are migrations
// appended to the result's `migrations`.
DbSchema ConsumerSchema(std::string tables, const InboxTable& table = {});

class Inbox {
 public:
  // Prepares its statements once, on `db` (the writer connection).
  explicit Inbox(SQLite::Database& db, const InboxTable& table = {});

  // The reference recorded for `message_id`, or nullopt if it is new.
  std::optional<std::string> Find(const std::string& message_id);
  // Records `message_id` as applied now. A second record of the same id
  // throws (its PRIMARY KEY): Find first.
  void Record(const std::string& message_id, const std::string& biz_key,
              const std::string& reference, int64_t processed_at_ms);

 private:
  SQLite::Statement find_;
  SQLite::Statement record_;
};

// True when an id processed before `cutoff_ms` is there (one step down the
// index; any connection, no write lock).
bool InboxHasOlderThan(SQLite::Database& db, const InboxTable& table, int64_t cutoff_ms);
// Deletes up to `limit` ids processed before `cutoff_ms`, oldest first;
// returns how many. Inside the caller's write transaction.
int PruneInbox(SQLite::Database& db, const InboxTable& table, int64_t cutoff_ms, int limit);

// The inbox as the pruner sees it, on a SqliteFile: the reader is asked
// first, so a pass with nothing due never waits for the writer's lock.
class SqliteProcessedLog final : public ProcessedLog {
 public:
  explicit SqliteProcessedLog(SqliteFile& file, InboxTable table = {})
      : file_(file), table_(std::move(table)) {}
  absl::StatusOr<int> PruneProcessed(int64_t cutoff_ms, int limit) override;

 private:
  SqliteFile& file_;
  const InboxTable table_;
};

}  // namespace outbox
