#include "checker/pg_copy.h"

#include <stdlib.h>

#include <SQLiteCpp/SQLiteCpp.h>

#include <filesystem>
#include <memory>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "checker/consistency_check.h"
#include "shared/postgres/pg_connection.h"

namespace outbox::checker {
namespace {

// One table the checks read: its columns in PostgreSQL, their declared
// types in the SQLite copy (the affinity the checks' comparisons rely on),
// and the indexes the checks' joins probe.
struct CopiedTable {
  const char* name;
  bool required;
  std::vector<std::pair<const char*, const char*>> columns;  // name, SQLite type
  std::vector<const char*> indexes;                          // column lists
};

const std::vector<CopiedTable>& Tables(PgSide side) {
  static const auto* const payment = new std::vector<CopiedTable>{
      {"payments",
       true,
       {{"payment_id", "TEXT"},
        {"amount_minor", "INTEGER"},
        {"currency", "TEXT"},
        {"created_at", "INTEGER"}},
       {"payment_id"}},
      {"outbox",
       true,
       {{"id", "INTEGER"},
        {"message_id", "TEXT"},
        {"biz_type", "TEXT"},
        {"biz_key", "TEXT"},
        {"status", "TEXT"},
        {"created_at", "INTEGER"},
        {"sent_at", "INTEGER"}},
       {"biz_type, biz_key", "message_id", "status"}},
      {"outbox_archive",
       false,
       {{"id", "INTEGER"},
        {"message_id", "TEXT"},
        {"biz_type", "TEXT"},
        {"biz_key", "TEXT"},
        {"status", "TEXT"},
        {"created_at", "INTEGER"},
        {"sent_at", "INTEGER"}},
       {}},
      {"outbox_retention",
       false,
       {{"name", "TEXT"}, {"pruned_before", "INTEGER"}, {"pruned_rows", "INTEGER"}},
       {}},
  };
  static const auto* const accounting = new std::vector<CopiedTable>{
      {"vouchers",
       true,
       {{"payment_id", "TEXT"},
        {"message_id", "TEXT"},
        {"amount_minor", "INTEGER"},
        {"currency", "TEXT"},
        {"created_at", "INTEGER"}},
       {"payment_id"}},
      {"processed_messages", true, {{"message_id", "TEXT"}}, {"message_id"}},
  };
  return side == PgSide::kPayment ? *payment : *accounting;
}

// FAILED_PRECONDITION when a schema of the database is newer than the
// checks know (consistency_check.h): its changes could make a check wrong.
absl::Status CheckPgSchemaVersions(PgConnection& pg, PgSide side, const std::string& name) {
  const std::vector<std::pair<const char*, int>> known =
      side == PgSide::kPayment
          ? std::vector<std::pair<const char*, int>>{{"outbox", kPgOutboxSchemaVersion},
                                                     {"payment", kPgPaymentSchemaVersion}}
          : std::vector<std::pair<const char*, int>>{{"accounting", kPgAccountingSchemaVersion}};
  absl::StatusOr<PgResult> table = pg.Query("SELECT to_regclass('schema_version') IS NOT NULL");
  if (!table.ok()) return table.status();
  if (table->Get(0, 0) != "t") return absl::OkStatus();  // unversioned: checked as it is
  for (const auto& [schema, version] : known) {
    absl::StatusOr<PgResult> row =
        pg.Query("SELECT version FROM schema_version WHERE name = $1", {std::string(schema)});
    if (!row.ok()) return row.status();
    int found = 0;
    if (row->rows() > 0 && absl::SimpleAtoi(row->Get(0, 0), &found) && found > version) {
      return absl::FailedPreconditionError(absl::StrCat(
          name, " has schema ", schema, " version ", found, "; this outbox_check knows up to ",
          version, ": refusing to check a newer database"));
    }
  }
  return absl::OkStatus();
}

bool IsUriPrefix(absl::string_view s) {
  return absl::StartsWith(s, "postgresql://") || absl::StartsWith(s, "postgres://");
}

}  // namespace

bool IsPgDatabase(absl::string_view setting) {
  return IsPgConninfo(setting);
}

std::string DisplayName(absl::string_view setting) {
  return IsPgDatabase(setting) ? RedactConninfo(setting) : std::string(setting);
}

std::vector<std::string> SplitAccountingDbs(absl::string_view accounting_db) {
  std::vector<std::string> out;
  for (absl::string_view piece : absl::StrSplit(accounting_db, ',', absl::SkipEmpty())) {
    // A URI whose authority is not closed by a '/' yet goes on with its next host.
    if (!out.empty() && IsUriPrefix(out.back()) &&
        out.back().find('/', out.back().find("://") + 3) == std::string::npos &&
        !IsUriPrefix(piece)) {
      absl::StrAppend(&out.back(), ",", piece);
      continue;
    }
    out.emplace_back(piece);
  }
  return out;
}

absl::Status CopyPgDatabase(const std::string& conninfo, PgSide side, const std::string& path) {
  const std::string name = RedactConninfo(conninfo);
  PgConnection::Options options;
  options.application_name = "outbox_check";
  absl::StatusOr<std::unique_ptr<PgConnection>> conn = PgConnection::Open(conninfo, options);
  if (!conn.ok()) return conn.status();
  PgConnection& pg = **conn;
  auto failed = [&](const absl::Status& s, absl::string_view step) {
    return absl::Status(s.code(), absl::StrCat(name, ": ", step, ": ", s.message()));
  };
  // One snapshot for every table of the database.
  if (absl::Status s = pg.Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); !s.ok()) {
    return failed(s, "begin");
  }
  if (absl::Status s = CheckPgSchemaVersions(pg, side, name); !s.ok()) {
    return s.code() == absl::StatusCode::kFailedPrecondition ? s : failed(s, "schema_version");
  }
  try {
    SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF");
    SQLite::Transaction tx(db);
    for (const CopiedTable& table : Tables(side)) {
      absl::StatusOr<PgResult> exists =
          pg.Query("SELECT to_regclass($1) IS NOT NULL", {std::string(table.name)});
      if (!exists.ok()) return failed(exists.status(), table.name);
      if (exists->Get(0, 0) != "t") {
        if (!table.required) continue;
        return absl::FailedPreconditionError(
            absl::StrCat(name, " has no table ", table.name, ": not a ",
                         side == PgSide::kPayment ? "payment" : "accounting", " database"));
      }
      std::vector<std::string> names, declared, params;
      for (const auto& [column, type] : table.columns) {
        names.push_back(column);
        declared.push_back(absl::StrCat(column, " ", type));
        params.push_back("?");
      }
      db.exec(absl::StrCat("CREATE TABLE ", table.name, " (", absl::StrJoin(declared, ", "), ")"));
      absl::StatusOr<PgResult> rows = pg.Query(
          absl::StrCat("SELECT ", absl::StrJoin(names, ", "), " FROM ", table.name, " ORDER BY 1"));
      if (!rows.ok()) return failed(rows.status(), table.name);
      SQLite::Statement insert(db, absl::StrCat("INSERT INTO ", table.name, " VALUES (",
                                                absl::StrJoin(params, ", "), ")"));
      for (int r = 0; r < rows->rows(); ++r) {
        insert.reset();
        for (int c = 0; c < rows->columns(); ++c) {
          if (rows->IsNull(r, c)) {
            insert.bind(c + 1);
          } else {
            // Bound as text; the column's affinity makes a number of it.
            insert.bind(c + 1, std::string(rows->Get(r, c)));
          }
        }
        insert.exec();
      }
      int k = 0;
      for (const char* index : table.indexes) {
        db.exec(absl::StrCat("CREATE INDEX ", table.name, "_", k++, " ON ", table.name, " (", index,
                             ")"));
      }
    }
    tx.commit();
  } catch (const SQLite::Exception& e) {
    pg.Exec("ROLLBACK").IgnoreError();
    return absl::InternalError(absl::StrCat("copy of ", name, " into ", path, ": ", e.what()));
  }
  if (absl::Status s = pg.Exec("COMMIT"); !s.ok()) return failed(s, "commit");
  return absl::OkStatus();
}

CopyDir::CopyDir() {
  std::error_code ec;
  std::string pattern = (std::filesystem::temp_directory_path(ec) / "outbox_check.XXXXXX").string();
  if (ec) pattern = "/tmp/outbox_check.XXXXXX";
  if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
}

CopyDir::~CopyDir() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string CopyDir::File(absl::string_view name) const {
  return absl::StrCat(path_, "/", name);
}

}  // namespace outbox::checker
