#include "shared/postgres/pg_recovery.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "shared/base/status_macros.h"
#include "shared/postgres/internal/pg_operator_store.h"
#include "shared/postgres/internal/pg_recovery_store.h"
#include "shared/postgres/pg_connection.h"
#include "shared/postgres/pg_schema.h"
#include "shared/postgres/pg_session.h"

namespace outbox {
namespace {

// How often the schema is looked for again while it is not there.
constexpr absl::Duration kSchemaPoll = absl::Milliseconds(250);

absl::StatusOr<std::unique_ptr<PgSession>> Connect(const Recovery::Options& options,
                                                   const std::string& role) {
  PgConnection::Options connection;
  connection.application_name =
      absl::StrCat(options.name, "-", role, "-", options.recovery.instance_id);
  auto session = PgSession::Open(options.db, connection);
  if (!session.ok()) {
    // The error names the server, without the password (RedactConninfo).
    return absl::Status(session.status().code(),
                        absl::StrCat("Recovery: ", session.status().message()));
  }
  return session;
}

// OK once the producer has created the outbox tables at this version;
// waits while they are missing or older, up to options.wait_for_db.
absl::Status WaitForSchema(PgSession& session, const Recovery::Options& options) {
  const absl::Time deadline = absl::Now() + options.wait_for_db;
  bool told = false;
  while (true) {
    absl::Status s = CheckPgSchema(session, PgOutboxSchema());
    if (s.ok()) return s;
    const bool absent = absl::IsNotFound(s) || absl::IsFailedPrecondition(s);
    if (!absent || absl::Now() >= deadline) {
      return absl::Status(
          s.code(), absl::StrCat("Recovery: the database ", session.redacted(),
                                 absent ? absl::StrCat(" after waiting ",
                                                       absl::FormatDuration(options.wait_for_db))
                                        : "",
                                 ": ", s.message()));
    }
    if (!told && options.on_wait) {
      options.on_wait(s);
      told = true;
    }
    absl::SleepFor(kSchemaPoll);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<Recovery>> StartPgRecovery(Recovery::Options options,
                                                          PgRowClosed on_closed) {
  if (!IsPgConninfo(options.db)) {
    return absl::InvalidArgumentError(
        "Recovery: options.db must be a postgresql:// or postgres:// URI");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<PgSession> loop_session, Connect(options, "loop"));
  RETURN_IF_ERROR(WaitForSchema(*loop_session, options));
  ASSIGN_OR_RETURN(std::unique_ptr<PgSession> ops_session, Connect(options, "ops"));
  auto store = std::make_unique<PgRecoveryStore>(std::move(loop_session));
  store->set_instance(options.recovery.instance_id);
  store->set_on_closed(std::move(on_closed));
  return Recovery::Start(std::move(options), std::move(store),
                         std::make_unique<PgOperatorStore>(std::move(ops_session)));
}

}  // namespace outbox
