#pragma once

// The outbox table in PostgreSQL (CreatePgOutboxTables, pg_schema.h): rows
// in and out, and what the stores do to them inside their transactions.
// The transitions themselves are state_machine.h's: rows are loaded FOR
// UPDATE, changed by On<Event> and stored, exactly as the SQLite stores do.
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/outbox/internal/history_events.h"
#include "shared/outbox/message.h"
#include "shared/outbox/repository.h"
#include "shared/postgres/pg_connection.h"

namespace outbox {

// Column list matching ReadPgOutboxRow, for SELECTs (table alias "o").
extern const char* const kPgOutboxColumns;

// A text[] literal of `values`, for `= ANY($1::text[])`.
std::string PgTextArray(const std::vector<std::string>& values);

// Row `row` of `result`, whose columns start with kPgOutboxColumns.
OutboxMessage ReadPgOutboxRow(const PgResult& result, int row);

// Inserts `row` (its id is the table's); returns the new id.
// ALREADY_EXISTS for a message id or business key already there.
absl::StatusOr<int64_t> InsertPgOutboxRow(PgConnection& conn, const OutboxMessage& row);

// The rows of these message ids, locked FOR UPDATE in id order (two
// transactions locking overlapping batches never deadlock), by message id.
absl::StatusOr<std::map<std::string, OutboxMessage>> LockPgOutboxRows(
    PgConnection& conn, const std::vector<std::string>& message_ids);

// Stores the state columns of `row` (by id): status, attempts, times,
// last_error, failure kind and group, acknowledged_by, restarted_at.
absl::Status SavePgOutboxRow(PgConnection& conn, const OutboxMessage& row);
// SavePgOutboxRow for each of `rows` (distinct ids), in one statement.
absl::Status SavePgOutboxRows(PgConnection& conn, const std::vector<const OutboxMessage*>& rows);

// Appends an event to outbox_history, keeping the newest
// kHistoryPerMessage of the message.
absl::Status AppendPgHistory(PgConnection& conn, const std::string& message_id, int64_t at_ms,
                             const std::string& instance, const std::string& event,
                             const std::string& detail);

// The adopter's step when a row closes (RowClosed of outbox_table.h, on
// PostgreSQL): SENT by an acknowledgement, FAILED by a reject or by
// recovery. It runs in the transaction that closes the row, under a
// savepoint: its error rolls back its own writes only, the row closes all
// the same, and row_closed_hook_failed is logged.
using PgRowClosed = std::function<absl::Status(PgConnection& conn, const OutboxMessage& row)>;

// `on_closed` (when set) for `row` under a savepoint. An error of the
// savepoint itself (the link) is returned.
absl::Status RunPgRowClosed(const PgRowClosed& on_closed, PgConnection& conn,
                            const OutboxMessage& row);

// The transitions of OutboxRepository inside the caller's transaction.
// PgRecordAcks stores the rows it closes in one statement, unless
// `on_closed` is set (then row by row, each followed by its step).
absl::StatusOr<AckTally> PgRecordAcks(PgConnection& conn, const std::vector<std::string>& ids,
                                      int64_t now_ms, const PgRowClosed& on_closed);
absl::StatusOr<int> PgRecordRejects(PgConnection& conn, const std::vector<Rejection>& rejects,
                                    int64_t now_ms, const PgRowClosed& on_closed);
absl::Status PgRecordPublishFailure(PgConnection& conn, const std::vector<std::string>& ids,
                                    const std::string& error, int64_t now_ms,
                                    const std::string& instance);
absl::StatusOr<std::vector<std::string>> PgTakenOver(PgConnection& conn,
                                                     const std::vector<std::string>& ids);

}  // namespace outbox
