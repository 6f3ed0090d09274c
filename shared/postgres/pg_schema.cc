#include "shared/postgres/pg_schema.h"

#include <errno.h>  // program_invocation_short_name

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/observability/log.h"

namespace outbox {
namespace {

// The key of the advisory lock that serializes upgrades: one for every
// schema of the database ("outbox_s" as 8 bytes).
constexpr char kUpgradeLock[] = "SELECT pg_advisory_xact_lock(8031170566412612467)";

absl::Status NewerPgSchemaError(const PgSchema& schema, int version) {
  // Named by the running program: the one too old to open it is this one.
  return absl::FailedPreconditionError(
      absl::StrCat("the database's schema ", schema.name, " has version ", version, "; this ",
                   program_invocation_short_name, " knows up to ", schema.latest(),
                   ": refusing to open a newer database"));
}

// The version, read in the caller's transaction.
absl::StatusOr<int> ReadVersion(PgConnection& conn, const std::string& schema_name) {
  ASSIGN_OR_RETURN(PgResult table, conn.Query("SELECT to_regclass('schema_version') IS NOT NULL"));
  if (table.Get(0, 0) != "t") return 0;
  ASSIGN_OR_RETURN(PgResult row,
                   conn.Query("SELECT version FROM schema_version WHERE name = $1", {schema_name}));
  int version = 0;
  if (row.rows() > 0 && !absl::SimpleAtoi(row.Get(0, 0), &version)) {
    return absl::InternalError(absl::StrCat("schema_version of ", schema_name, " is not a number"));
  }
  return version;
}

// An adopter's schema named as none of the library's: its versions are its own.
absl::Status CheckName(const PgSchema& schema) {
  if (schema.name.empty()) {
    return absl::InvalidArgumentError(
        "a PgSchema has no name: name it (its row of schema_version), e.g. after the service");
  }
  const PgSchema& library = PgOutboxSchema();
  if (schema.name == library.name && &schema != &library) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a PgSchema named \"", schema.name, "\": the name is the library's (PgOutboxSchema), ",
        "whose versions would be taken for this schema's; give it a name of its own"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<int> PgSchemaVersion(PgConnection& conn, const std::string& schema_name) {
  return ReadVersion(conn, schema_name);
}

absl::Status UpgradePgSchema(PgSession& session, const PgSchema& schema) {
  RETURN_IF_ERROR(CheckName(schema));
  int version = 0;
  // The usual start: up to date, found without the lock.
  RETURN_IF_ERROR(session.Transaction("read the schema version", [&](PgConnection& conn) {
    ASSIGN_OR_RETURN(version, ReadVersion(conn, schema.name));
    return absl::OkStatus();
  }));
  if (version > schema.latest()) return NewerPgSchemaError(schema, version);
  while (version < schema.latest()) {
    const PgMigration* applied = nullptr;
    RETURN_IF_ERROR(session.Transaction(
        absl::StrCat("upgrade schema ", schema.name), [&](PgConnection& conn) -> absl::Status {
          applied = nullptr;
          RETURN_IF_ERROR(conn.Exec(kUpgradeLock));
          // Another opener may have moved the version since it was read.
          RETURN_IF_ERROR(conn.Exec(R"sql(
            CREATE TABLE IF NOT EXISTS schema_version (
              name    TEXT PRIMARY KEY,
              version INTEGER NOT NULL
            ))sql"));
          ASSIGN_OR_RETURN(version, ReadVersion(conn, schema.name));
          if (version > schema.latest()) return NewerPgSchemaError(schema, version);
          if (version >= schema.latest()) return absl::OkStatus();
          const PgMigration& next = schema.migrations[static_cast<size_t>(version)];
          RETURN_IF_ERROR(next.apply(conn));
          RETURN_IF_ERROR(conn.Query(R"sql(
            INSERT INTO schema_version (name, version) VALUES ($1, $2)
            ON CONFLICT (name) DO UPDATE SET version = excluded.version)sql",
                                     {schema.name, std::to_string(version + 1)})
                              .status());
          applied = &next;
          return absl::OkStatus();
        }));
    if (applied == nullptr) break;
    LogInfo("schema_upgraded",
            {KV("db", "postgresql"), KV("schema", schema.name), KV("from", version),
             KV("to", version + 1), KV("change", applied->what)});
    ++version;
  }
  return absl::OkStatus();
}

absl::Status CheckPgSchema(PgSession& session, const PgSchema& schema) {
  RETURN_IF_ERROR(CheckName(schema));
  int version = 0;
  RETURN_IF_ERROR(session.Transaction("read the schema version", [&](PgConnection& conn) {
    ASSIGN_OR_RETURN(version, ReadVersion(conn, schema.name));
    return absl::OkStatus();
  }));
  if (version > schema.latest()) return NewerPgSchemaError(schema, version);
  if (version == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the database holds no schema ", schema.name,
        " (no row for it in schema_version): its producer creates it; is this its database?"));
  }
  if (version < schema.latest()) {
    return absl::NotFoundError(absl::StrCat("the database's schema ", schema.name, " has version ",
                                            version, ", not ", schema.latest(),
                                            " yet (its producer creates and upgrades it)"));
  }
  return absl::OkStatus();
}

absl::Status CreatePgOutboxTables(PgConnection& conn) {
  // The columns of outbox, in one place: outbox_archive has the same ones,
  // without the constraints (rows move there as they are).
  const std::string columns = R"sql(
      message_id      TEXT    NOT NULL,
      biz_type        TEXT    NOT NULL,
      biz_key         TEXT    NOT NULL,
      topic           TEXT    NOT NULL,
      payload         BYTEA   NOT NULL,
      status          TEXT    NOT NULL,
      attempts        INTEGER NOT NULL DEFAULT 0,
      max_attempts    INTEGER NOT NULL,
      next_retry_at   BIGINT  NOT NULL,
      last_attempt_at BIGINT  NOT NULL DEFAULT 0,
      last_error      TEXT    NOT NULL DEFAULT '',
      created_at      BIGINT  NOT NULL,
      updated_at      BIGINT  NOT NULL,
      sent_at         BIGINT  NOT NULL DEFAULT 0,
      message_type    TEXT    NOT NULL DEFAULT '',
      reply_to        TEXT    NOT NULL DEFAULT '',
      traceparent     TEXT    NOT NULL DEFAULT '',
      failure_kind    TEXT    NOT NULL DEFAULT '',
      failure_group   TEXT    NOT NULL DEFAULT '',
      acknowledged_by TEXT    NOT NULL DEFAULT '',
      restarted_at    BIGINT  NOT NULL DEFAULT 0)sql";
  return conn.Exec(absl::StrCat(
      "CREATE TABLE outbox (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,", columns,
      R"sql(,
      UNIQUE (message_id),
      UNIQUE (biz_type, biz_key),
      CHECK (status IN ('SENDING', 'SENT', 'FAILED')));
    -- Due rows, oldest due first (the claim).
    CREATE INDEX outbox_status_next_retry ON outbox (status, next_retry_at);
    -- Retention walks SENT rows by age without touching the rest.
    CREATE INDEX outbox_sent_at ON outbox (sent_at) WHERE status = 'SENT';
    -- Failure groups: FAILED rows counted and walked by group.
    CREATE INDEX outbox_failure_group ON outbox (failure_group, id) WHERE status = 'FAILED';
    -- Archived SENT rows, the same columns, moved here in small batches.
    CREATE TABLE outbox_archive (id BIGINT NOT NULL,)sql",
      columns, R"sql();
    CREATE INDEX outbox_archive_sent_at ON outbox_archive (sent_at);
    -- Which recovery instance may claim rows, until when.
    CREATE TABLE recovery_lease (
      name       TEXT PRIMARY KEY,
      holder     TEXT   NOT NULL,
      expires_at BIGINT NOT NULL
    );
    -- What happened to a message beyond "published once, acknowledged".
    CREATE TABLE outbox_history (
      id         BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
      message_id TEXT   NOT NULL,
      at         BIGINT NOT NULL,
      instance   TEXT   NOT NULL,
      event      TEXT   NOT NULL,
      detail     TEXT   NOT NULL DEFAULT ''
    );
    CREATE INDEX outbox_history_message ON outbox_history (message_id, id);
    -- Every operator action that changed rows (or tried to).
    CREATE TABLE outbox_audit (
      id      BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
      at      BIGINT  NOT NULL,
      actor   TEXT    NOT NULL,
      action  TEXT    NOT NULL,
      target  TEXT    NOT NULL,
      dry_run INTEGER NOT NULL,
      rows    BIGINT  NOT NULL,
      outcome TEXT    NOT NULL,
      reason  TEXT    NOT NULL DEFAULT ''
    );
    CREATE INDEX outbox_audit_at ON outbox_audit (at);
    -- What retention deleted, per table: rows older than pruned_before
    -- (unix ms; outbox_archive by sent_at, outbox_audit by at) may be gone
    -- on purpose. Written in the transaction of each delete.
    CREATE TABLE outbox_retention (
      name          TEXT PRIMARY KEY,
      pruned_before BIGINT NOT NULL,
      pruned_rows   BIGINT NOT NULL
    );)sql"));
}

absl::Status CreatePgInboxTable(PgConnection& conn, const std::string& table) {
  return conn.Exec(
      absl::StrCat("CREATE TABLE ", table,
                   " (message_id TEXT PRIMARY KEY, biz_key TEXT NOT NULL, reference TEXT NOT NULL, "
                   "processed_at BIGINT NOT NULL); CREATE INDEX ",
                   table, "_processed_at ON ", table, " (processed_at)"));
}

PgSchema PgConsumerSchema(std::string name, std::string tables, std::string inbox_table) {
  return PgSchema{std::move(name),
                  {{"the adopter's tables and the inbox",
                    [tables = std::move(tables),
                     inbox_table = std::move(inbox_table)](PgConnection& conn) -> absl::Status {
                      RETURN_IF_ERROR(conn.Exec(tables));
                      return CreatePgInboxTable(conn, inbox_table);
                    }}}};
}

const PgSchema& PgOutboxSchema() {
  static const PgSchema* const schema =
      new PgSchema{"outbox", {{"outbox tables", CreatePgOutboxTables}}};
  return *schema;
}

}  // namespace outbox
