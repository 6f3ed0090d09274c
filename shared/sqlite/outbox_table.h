#pragma once

// The outbox table in SQLite: rows in and out, and the state machine's
// transitions (shared/outbox/internal/state_machine.h) applied to stored rows. The
// producer writes rows and closes acknowledged ones; recovery
// (recovery_store.h) claims due rows and its operator (operator_store.h)
// re-drives, on the same file.
// Everything throws SQLite::Exception and runs inside the caller's
// transaction.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>

#include "absl/status/status.h"

#include "shared/outbox/internal/state_machine.h"
#include "shared/outbox/message.h"
#include "shared/outbox/repository.h"
#include "shared/sqlite/schema.h"

namespace outbox {

// Creates what the pattern keeps in the producer's database, unless it is
// there: the outbox table with today's columns and the index due rows are
// found by, outbox_archive and the index retention walks, and
// recovery_lease, and what CreateOutboxOperatorTables,
// CreateOutboxRetentionTables and AddOutboxRestartedAt make. A producer
// calls it in a migration of its own schema (schema.h), in the transaction
// that writes its business tables.
void CreateOutboxTable(SQLite::Database& db);

// A producer's schema in one call: its migration 1 runs `tables` (the
// adopter's CREATE statements, several separated by ';') and
// CreateOutboxTable in one transaction. Later versions are migrations
// appended to the result's `migrations`.
DbSchema ProducerSchema(std::string tables);

// What the operator's tools keep, added to an outbox made before them
// (unless there): the failure_kind, failure_group and acknowledged_by
// columns, the failure-group index, outbox_history and outbox_audit. A
// producer whose file predates them calls it in a new migration of its
// schema; CreateOutboxTable calls it too.
void CreateOutboxOperatorTables(SQLite::Database& db);

// The reason column of outbox_audit (AuditRecord::reason: why the operator
// acted, in their words), added unless there. Needs the tables of
// CreateOutboxOperatorTables. A producer whose file predates it calls it in
// a new migration of its schema (the audit trail writes and reads the
// column); CreateOutboxTable calls it too.
void AddOutboxAuditReason(SQLite::Database& db);

// What the retention of the archive and of the audit trail needs, added to
// an outbox made before it (unless there): the indexes their deletes walk
// (outbox_archive by sent_at, outbox_audit by at) and outbox_retention, the
// watermark of each (rows older than it may have been deleted on purpose).
// Needs the tables of CreateOutboxOperatorTables. A producer whose file
// predates it calls it in a new migration of its schema (building the
// archive's index reads the whole archive once); CreateOutboxTable calls it
// too.
void CreateOutboxRetentionTables(SQLite::Database& db);

// The restarted_at column (OutboxMessage::restarted_at), added to outbox and
// outbox_archive (unless there); each row of outbox that an operator
// re-drove or a repair restarted gets the time of its newest `redriven` or
// `repaired` history event. Needs the tables of CreateOutboxOperatorTables.
// A producer whose file predates it calls it in a new migration of its
// schema (the stores read the column); CreateOutboxTable calls it too.
void AddOutboxRestartedAt(SQLite::Database& db);

// Column list matching ReadOutboxMessage, for SELECTs (table alias "o").
extern const char* const kOutboxColumns;

// Inserts rows with one prepared statement.
class OutboxInserter {
 public:
  explicit OutboxInserter(SQLite::Database& db);
  // Returns the new row id.
  int64_t Insert(const OutboxMessage& row);

 private:
  SQLite::Database& db_;
  SQLite::Statement stmt_;
};

// Reads the columns of kOutboxColumns starting at column `first`.
OutboxMessage ReadOutboxMessage(SQLite::Statement& stmt, int first = 0);

// Loads rows by message id and stores the state columns of changed ones,
// with statements prepared once; each call leaves its statement reset, so
// an owner may keep one across transactions.
class OutboxStateTable {
 public:
  explicit OutboxStateTable(SQLite::Database& db);
  std::optional<OutboxMessage> Load(const std::string& message_id);
  // Writes status, attempts, times and last_error of `row` (by id).
  void Save(const OutboxMessage& row);

 private:
  SQLite::Statement load_;
  SQLite::Statement save_;
};

// The adopter's step when a row closes: SENT by an acknowledgement (also a
// FAILED row acknowledged late), FAILED by the consumer's reject or by
// recovery (attempts spent, or too old). It runs inside the transaction
// that closes the row, with the row as saved, under a savepoint of its own,
// so what it writes (the business record marked confirmed, say) commits
// with the row's new state. An error it returns, or a SQLite::Exception it
// throws, rolls back its own writes only: the row closes all the same, and
// row_closed_hook_failed is logged with the error. Keep it short: the
// transaction it runs in is the producer's group or recovery's claim.
using RowClosed = std::function<absl::Status(SQLite::Database& db, const OutboxMessage& row)>;

// `on_closed` (when set) for `row`, under a savepoint, its failure logged.
void RunRowClosed(const RowClosed& on_closed, SQLite::Database& db, const OutboxMessage& row);

// OnAck for each id. Unknown ids are skipped. A row that was published
// more than once, or was FAILED, gets an "acknowledged" history event; the
// happy path writes no history.
// `on_closed` runs for each row that turned SENT.
AckTally RecordAcks(SQLite::Database& db, const std::vector<std::string>& message_ids,
                    int64_t now_ms, const RowClosed& on_closed = nullptr);
// The same through `table`, statements its owner keeps prepared on `db`.
AckTally RecordAcks(OutboxStateTable& table, SQLite::Database& db,
                    const std::vector<std::string>& message_ids, int64_t now_ms,
                    const RowClosed& on_closed = nullptr);

// OnReject for each rejection, with a "rejected" history event for each
// row it changed; returns how many. Unknown ids are skipped, and so are
// rejects made before their row's last restart.
// `on_closed` runs for each row it turned FAILED.
int RecordRejects(SQLite::Database& db, const std::vector<Rejection>& rejects, int64_t now_ms,
                  const RowClosed& on_closed = nullptr);

// Of `message_ids`, those no longer SENDING or re-published by recovery
// already (OutboxRepository::TakenOver), read on `db`.
std::vector<std::string> TakenOver(SQLite::Database& db,
                                   const std::vector<std::string>& message_ids);

// OnPublishFailure for each id, with a "publish_failed" history event by
// `instance` for each row noted.
void RecordPublishFailure(SQLite::Database& db, const std::vector<std::string>& message_ids,
                          const std::string& error, int64_t now_ms, const std::string& instance);

}  // namespace outbox
