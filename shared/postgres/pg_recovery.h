#pragma once

// The recovery role on a producer's PostgreSQL database, in one call: the
// counterpart of Recovery::Start(options) (shared/roles/recovery.h), which
// opens a SQLite file. options.db is the database's libpq URI
// (IsPgConninfo). Like the file, the database is its producer's: recovery
// waits up to options.wait_for_db for the producer to create its outbox
// tables (PgOutboxSchema(), CheckPgSchema) and never creates or upgrades
// them. The loop runs on a PgRecoveryStore, the operator's verbs
// (operator_store()) on a PgOperatorStore, each on a connection of its own.
//
// Several recovery processes on one database share it: one holds the lease
// (recovery_lease) and claims due rows under its fence, and every claim
// locks its rows FOR UPDATE SKIP LOCKED, so no row is claimed twice.
#include <memory>

#include "absl/status/statusor.h"
#include "shared/postgres/pg_outbox_table.h"
#include "shared/roles/recovery.h"

namespace outbox {

// Connects (a refused or unreachable server, refused credentials: that
// error at once, the connection string shown without its password), waits
// for the schema (options.on_wait told once why), then Recovery::Start on
// the PostgreSQL stores. `on_closed` runs in the claim that turns a row
// FAILED (PgRowClosed); options.producer_db, options.db_options and
// options.on_closed are not read. INVALID_ARGUMENT when options.db is not a
// libpq URI; the schema check's error (NOT_FOUND, FAILED_PRECONDITION) when
// the tables are not there in time.
absl::StatusOr<std::unique_ptr<Recovery>> StartPgRecovery(Recovery::Options options,
                                                          PgRowClosed on_closed = nullptr);

}  // namespace outbox
