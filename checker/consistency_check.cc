#include "checker/consistency_check.h"

#include <sqlite3.h>

#include <SQLiteCpp/SQLiteCpp.h>

#include <filesystem>
#include <functional>
#include <initializer_list>
#include <memory>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "checker/pg_copy.h"

namespace outbox::checker {
namespace {

absl::Status FromSqlite(const SQLite::Exception& e, const std::string& context) {
  const int code = e.getErrorCode() & 0xff;
  const std::string msg = absl::StrCat(context, ": ", e.what());
  if (code == SQLITE_BUSY || code == SQLITE_LOCKED) return absl::UnavailableError(msg);
  if (code == SQLITE_ERROR || code == SQLITE_NOTADB || code == SQLITE_CANTOPEN ||
      code == SQLITE_READONLY || code == SQLITE_PERM) {
    return absl::FailedPreconditionError(msg);  // wrong file, missing table, no access
  }
  return absl::InternalError(msg);
}

// SQLite URI for a read-only open. The path is made absolute and '%', '?' and
// '#' escaped, so no file name can smuggle in URI parameters.
absl::StatusOr<std::string> ReadOnlyUri(const std::string& path, const char* what) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " path is empty"));
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return absl::NotFoundError(absl::StrCat(what, " not found (or not a file): ", path));
  }
  std::string uri = "file://";
  for (char c : std::filesystem::absolute(path, ec).string()) {
    if (c == '%' || c == '?' || c == '#') {
      absl::StrAppend(&uri, absl::StrFormat("%%%02X", static_cast<unsigned char>(c)));
    } else {
      uri.push_back(c);
    }
  }
  return absl::StrCat(uri, "?mode=ro");
}

int64_t Scalar(SQLite::Database& db, const std::string& sql) {
  SQLite::Statement stmt(db, sql);
  return stmt.executeStep() ? stmt.getColumn(0).getInt64() : 0;
}

// The checks name accounting's tables acc.vouchers and
// acc.processed_messages. With accounting shards each accounting.db is
// attached as acc0, acc1, ... and those names stand for the UNION ALL of
// every shard's table, so a payment booked on two shards shows up as a
// payment with two vouchers.
class AccountingTables {
 public:
  explicit AccountingTables(size_t shards) {
    if (shards <= 1) return;
    std::vector<std::string> vouchers, processed;
    for (size_t k = 0; k < shards; ++k) {
      // The columns the checks read, named: shards of different schema
      // versions (or a PostgreSQL copy beside a file) have different others.
      vouchers.push_back(absl::StrCat(
          "SELECT payment_id, message_id, amount_minor, currency FROM acc", k, ".vouchers"));
      processed.push_back(absl::StrCat("SELECT message_id FROM acc", k, ".processed_messages"));
    }
    replacements_ = {
        {"acc.vouchers", absl::StrCat("(", absl::StrJoin(vouchers, " UNION ALL "), ")")},
        {"acc.processed_messages",
         absl::StrCat("(", absl::StrJoin(processed, " UNION ALL "), ")")}};
  }
  std::string operator()(const std::string& sql) const {
    return replacements_.empty() ? sql : absl::StrReplaceAll(sql, replacements_);
  }

 private:
  std::vector<std::pair<std::string, std::string>> replacements_;
};

// FAILED_PRECONDITION for the first file whose schema is newer than the
// checks know; `schema` is the attached name ("main", "acc", "acc0", ...).
absl::Status CheckSchemaVersion(SQLite::Database& db, const std::string& schema,
                                const std::string& path, int known) {
  const int64_t version = Scalar(db, absl::StrCat("PRAGMA ", schema, ".user_version"));
  if (version <= known) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(path, " has schema version ", version,
                                                    "; this outbox_check knows up to ", known,
                                                    ": refusing to check a newer file"));
}

// "s<digits>-" only, so it can stand in the SQL as a literal; empty = no prefix.
absl::Status ValidatePaymentIdPrefix(const std::string& prefix) {
  if (!prefix.empty() && (prefix.size() < 3 || prefix.front() != 's' || prefix.back() != '-' ||
                          prefix.find_first_not_of("0123456789", 1) != prefix.size() - 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("payment id prefix '", prefix, "' is not s<shard>- (e.g. s0-)"));
  }
  return absl::OkStatus();
}

// The read-only URI of each accounting.db; at least one, at most kMaxAccountingDbs.
absl::StatusOr<std::vector<std::string>> AccountingUris(
    const std::vector<std::string>& accounting_dbs) {
  if (accounting_dbs.size() > kMaxAccountingDbs) {
    return absl::InvalidArgumentError(
        absl::StrCat("at most ", kMaxAccountingDbs, " accounting dbs (SQLite attaches 10)"));
  }
  std::vector<std::string> accounting_uris;
  for (const std::string& path : accounting_dbs) {
    absl::StatusOr<std::string> uri = ReadOnlyUri(path, "accounting db");
    if (!uri.ok()) return uri.status();
    accounting_uris.push_back(*std::move(uri));
  }
  if (accounting_uris.empty()) return ReadOnlyUri("", "accounting db").status();
  return accounting_uris;
}

// The name accounting.db number k of n is attached as: acc alone, else acc0, acc1, ...
std::string AccountingSchema(size_t k, size_t n) {
  return absl::StrCat("acc", n > 1 ? absl::StrCat(k) : "");
}

// Attaches each accounting.db; `step` names the one being attached, for an error.
void AttachAccounting(SQLite::Database& db, const std::vector<std::string>& accounting_dbs,
                      const std::vector<std::string>& accounting_uris, std::string* step) {
  for (size_t k = 0; k < accounting_uris.size(); ++k) {
    *step = absl::StrCat("attach ", accounting_dbs[k]);
    SQLite::Statement attach(
        db, absl::StrCat("ATTACH DATABASE ?1 AS ", AccountingSchema(k, accounting_uris.size())));
    attach.bind(1, accounting_uris[k]);
    attach.exec();
  }
}

// payment.db's schema version, then each accounting.db's (see CheckSchemaVersion).
absl::Status CheckSchemaVersions(SQLite::Database& db, const std::string& payment_db,
                                 const std::vector<std::string>& accounting_dbs) {
  absl::Status versions = CheckSchemaVersion(db, "main", payment_db, kPaymentDbSchemaVersion);
  for (size_t k = 0; k < accounting_dbs.size() && versions.ok(); ++k) {
    versions = CheckSchemaVersion(db, AccountingSchema(k, accounting_dbs.size()), accounting_dbs[k],
                                  kAccountingDbSchemaVersion);
  }
  return versions;
}

// Steps through every row (each one breaks the invariant, so normally none)
// counting them, and keeps the first few ids: one pass, no second COUNT query.
// With `excused`, a row whose second column is true is counted there
// instead: explained, not a violation.
CheckResult Collect(SQLite::Database& db, const CheckConfig& config, const AccountingTables& acc,
                    std::string name, std::string description, const std::string& sql,
                    std::initializer_list<int64_t> binds = {}, int64_t* excused = nullptr) {
  CheckResult result;
  result.name = std::move(name);
  result.description = std::move(description);
  SQLite::Statement stmt(db, acc(sql));
  int index = 1;
  for (int64_t value : binds) stmt.bind(index++, value);
  while (stmt.executeStep()) {
    if (excused != nullptr && stmt.getColumn(1).getInt() != 0) {
      ++*excused;
      continue;
    }
    if (result.count++ < config.max_examples) {
      result.examples.push_back(stmt.getColumn(0).getString());
    }
  }
  return result;
}

bool HasTable(SQLite::Database& db, const char* name) {
  SQLite::Statement stmt(
      db, "SELECT count(*) FROM main.sqlite_master WHERE type = 'table' AND name = ?");
  stmt.bind(1, name);
  return stmt.executeStep() && stmt.getColumn(0).getInt64() > 0;
}

// Reads accounting.db first, then payment.db (see the ordering note in Check).
void CheckAccountingFirst(SQLite::Database& db, const CheckConfig& config,
                          const AccountingTables& acc, Report& report) {
  SQLite::Transaction tx(db, SQLite::TransactionBehavior::DEFERRED);
  report.counts.vouchers = Scalar(db, acc("SELECT count(*) FROM acc.vouchers"));
  report.counts.processed_messages = Scalar(db, acc("SELECT count(*) FROM acc.processed_messages"));
  report.checks.push_back(Collect(
      db, config, acc, "voucher_without_payment", "voucher whose payment does not exist",
      R"sql(
    SELECT v.payment_id FROM acc.vouchers v
    WHERE NOT EXISTS (SELECT 1 FROM main.payments p WHERE p.payment_id = v.payment_id))sql" +
          (config.payment_id_prefix.empty()
               ? std::string()
               : absl::StrCat(" AND substr(v.payment_id, 1, ", config.payment_id_prefix.size(),
                              ") = '", config.payment_id_prefix, "'"))));
  tx.commit();
}

// Reads payment.db first, then accounting.db.
void CheckPaymentFirst(SQLite::Database& db, const CheckConfig& config, const AccountingTables& acc,
                       absl::Time now, Report& report) {
  SQLite::Transaction tx(db, SQLite::TransactionBehavior::DEFERRED);
  Counts& counts = report.counts;
  counts.payments = Scalar(db, "SELECT count(*) FROM main.payments");
  SQLite::Statement by_status(db, "SELECT status, count(*) FROM main.outbox GROUP BY status");
  while (by_status.executeStep()) {
    const std::string status = by_status.getColumn(0).getString();
    const int64_t n = by_status.getColumn(1).getInt64();
    if (status == "SENDING") counts.outbox_sending = n;
    if (status == "SENT") counts.outbox_sent = n;
    if (status == "FAILED") counts.outbox_failed = n;
  }
  // The archive (retention moves SENT rows there) is optional and, being made
  // by CREATE TABLE AS, has no index but the one on sent_at that retention
  // deletes by: it is only ever scanned, or probed through a NOT IN list
  // that SQLite indexes once per query.
  const bool archive = HasTable(db, "outbox_archive");
  if (archive) counts.outbox_archived = Scalar(db, "SELECT count(*) FROM main.outbox_archive");
  auto with_archive = [archive](const char* sql) { return archive ? std::string(sql) : ""; };
  // Retention deletes archived rows and records the sent_at below which it
  // did (its watermark), in the same transaction.
  if (HasTable(db, "outbox_retention")) {
    report.archive_pruned_before = Scalar(db, R"sql(
      SELECT coalesce(max(pruned_before), 0) FROM main.outbox_retention
      WHERE name = 'outbox_archive')sql");
  }

  // A payment with no row anywhere was pruned, not lost, when it was
  // created before the watermark (its row was acknowledged after it was
  // created, so none younger can have been pruned) and is booked (only SENT
  // rows are archived, and a SENT row has its voucher).
  report.checks.push_back(Collect(db, config, acc, "payment_without_outbox",
                                  "payment with no outbox row",
                                  R"sql(
    SELECT p.payment_id,
           p.created_at < ?1
             AND EXISTS (SELECT 1 FROM acc.vouchers v WHERE v.payment_id = p.payment_id)
    FROM main.payments p
    WHERE NOT EXISTS (SELECT 1 FROM main.outbox o
                      WHERE o.biz_type = 'payment' AND o.biz_key = p.payment_id))sql" +
                                      with_archive(R"sql(
      AND p.payment_id NOT IN (SELECT biz_key FROM main.outbox_archive
                               WHERE biz_type = 'payment' AND biz_key IS NOT NULL))sql"),
                                  {report.archive_pruned_before}, &counts.outbox_pruned));

  report.checks.push_back(Collect(db, config, acc, "outbox_without_payment",
                                  "outbox row (biz_type payment) with no payment",
                                  R"sql(
    SELECT o.biz_key FROM main.outbox o
    WHERE o.biz_type = 'payment'
      AND NOT EXISTS (SELECT 1 FROM main.payments p WHERE p.payment_id = o.biz_key))sql" +
                                      with_archive(R"sql(
    UNION ALL
    SELECT a.biz_key FROM main.outbox_archive a
    WHERE a.biz_type = 'payment'
      AND NOT EXISTS (SELECT 1 FROM main.payments p WHERE p.payment_id = a.biz_key))sql")));

  report.checks.push_back(Collect(db, config, acc, "sent_without_voucher",
                                  "SENT (or archived) outbox row with no voucher",
                                  R"sql(
    SELECT o.biz_key FROM main.outbox o
    WHERE o.status = 'SENT' AND o.biz_type = 'payment'
      AND NOT EXISTS (SELECT 1 FROM acc.vouchers v WHERE v.payment_id = o.biz_key))sql" +
                                      with_archive(R"sql(
    UNION ALL
    SELECT a.biz_key FROM main.outbox_archive a
    WHERE a.biz_type = 'payment'
      AND NOT EXISTS (SELECT 1 FROM acc.vouchers v WHERE v.payment_id = a.biz_key))sql")));

  // A voucher proves the message was delivered: its acknowledgement closes a
  // FAILED row (SENT), so a FAILED row with a voucher is an alert that
  // should have resolved (or an acknowledgement lost on the way).
  report.checks.push_back(Collect(db, config, acc, "failed_with_voucher",
                                  "FAILED outbox row whose payment has a voucher", R"sql(
    SELECT o.biz_key FROM main.outbox o
    WHERE o.status = 'FAILED' AND o.biz_type = 'payment'
      AND EXISTS (SELECT 1 FROM acc.vouchers v WHERE v.payment_id = o.biz_key))sql"));

  // vouchers.payment_id is UNIQUE, so this only fires on a schema regression.
  report.checks.push_back(Collect(db, config, acc, "payment_multiple_vouchers",
                                  "payment with more than one voucher", R"sql(
    SELECT payment_id FROM acc.vouchers GROUP BY payment_id HAVING count(*) > 1)sql"));

  report.checks.push_back(Collect(db, config, acc, "voucher_amount_mismatch",
                                  "voucher amount_minor or currency differs from its payment",
                                  R"sql(
    SELECT v.payment_id FROM acc.vouchers v
    JOIN main.payments p ON p.payment_id = v.payment_id
    WHERE v.amount_minor IS NOT p.amount_minor OR v.currency IS NOT p.currency)sql"));

  report.checks.push_back(Collect(db, config, acc, "voucher_message_id_mismatch",
                                  "voucher message_id differs from its outbox row's", R"sql(
    SELECT v.payment_id FROM acc.vouchers v
    JOIN main.outbox o ON o.biz_type = 'payment' AND o.biz_key = v.payment_id
    WHERE v.message_id IS NOT o.message_id)sql" + with_archive(R"sql(
    UNION ALL
    SELECT v.payment_id FROM main.outbox_archive a
    JOIN acc.vouchers v ON v.payment_id = a.biz_key
    WHERE a.biz_type = 'payment' AND v.message_id IS NOT a.message_id)sql")));

  CheckResult stale =
      Collect(db, config, acc, "stale_sending",
              absl::StrCat("SENDING outbox row created more than ",
                           absl::FormatDuration(config.stale_after), " ago"),
              "SELECT biz_key FROM main.outbox WHERE status = 'SENDING' AND created_at < ?1",
              {absl::ToUnixMillis(now - config.stale_after)});
  stale.is_violation = config.fail_on_stale;
  report.checks.push_back(std::move(stale));

  report.sending_with_voucher = Scalar(db, acc(R"sql(
    SELECT count(*) FROM main.outbox o
    WHERE o.status = 'SENDING' AND o.biz_type = 'payment'
      AND EXISTS (SELECT 1 FROM acc.vouchers v WHERE v.payment_id = o.biz_key))sql"));
  tx.commit();
}

}  // namespace

bool Report::ok() const {
  for (const CheckResult& c : checks) {
    if (c.failed()) return false;
  }
  return true;
}

const CheckResult* Report::Find(const std::string& name) const& {
  for (const CheckResult& c : checks) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

namespace {

// Opens payment.db read-only with every accounting.db attached, refuses
// newer schema versions, and runs `body` on the connection. `step` names
// what `body` is doing, for an error.
absl::Status WithDatabases(
    const CheckConfig& config,
    const std::function<void(SQLite::Database&, const AccountingTables&, std::string*)>& body) {
  absl::Status prefix = ValidatePaymentIdPrefix(config.payment_id_prefix);
  if (!prefix.ok()) return prefix;
  absl::StatusOr<std::string> payment_uri = ReadOnlyUri(config.payment_db, "payment db");
  if (!payment_uri.ok()) return payment_uri.status();
  const std::vector<std::string> accounting_dbs = SplitAccountingDbs(config.accounting_db);
  absl::StatusOr<std::vector<std::string>> accounting_uris = AccountingUris(accounting_dbs);
  if (!accounting_uris.ok()) return accounting_uris.status();

  const AccountingTables acc(accounting_uris->size());
  std::string step = absl::StrCat("open ", config.payment_db);
  try {
    // One connection with accounting.db attached, so each cross-database
    // check is a single join that SQLite runs on the UNIQUE indexes.
    SQLite::Database db(*payment_uri, SQLite::OPEN_READONLY | SQLite::OPEN_URI);
    db.setBusyTimeout(5000);
    AttachAccounting(db, accounting_dbs, *accounting_uris, &step);
    step = "read the schema versions";
    absl::Status versions = CheckSchemaVersions(db, config.payment_db, accounting_dbs);
    if (!versions.ok()) return versions;
    body(db, acc, &step);
  } catch (const SQLite::Exception& e) {
    return FromSqlite(e, step);
  }
  return absl::OkStatus();
}

// Rows of (message_id, payment_id, archive rowid, processed, live row).
std::vector<RepairCandidate> Candidates(SQLite::Database& db, const AccountingTables& acc,
                                        const std::string& sql) {
  std::vector<RepairCandidate> rows;
  SQLite::Statement stmt(db, acc(sql));
  while (stmt.executeStep()) {
    RepairCandidate c;
    c.message_id = stmt.getColumn(0).getString();
    c.payment_id = stmt.getColumn(1).getString();
    c.archive_rowid = stmt.getColumn(2).getInt64();
    c.processed = stmt.getColumn(3).getInt() != 0;
    c.live_row = stmt.getColumn(4).getInt() != 0;
    rows.push_back(std::move(c));
  }
  return rows;
}

}  // namespace

namespace {

absl::StatusOr<RepairCandidates> FindRepairCandidatesOnFiles(const CheckConfig& config) {
  RepairCandidates found;
  absl::Status s = WithDatabases(
      config, [&](SQLite::Database& db, const AccountingTables& acc, std::string* step) {
        *step = "find the rows to repair";
        // As in CheckPaymentFirst: payment.db's snapshot is taken first (by the
        // first statement), so a SENT row is judged against vouchers committed
        // before it was read.
        SQLite::Transaction tx(db, SQLite::TransactionBehavior::DEFERRED);
        const bool archive = HasTable(db, "outbox_archive");
        found.sent_without_voucher = Candidates(db, acc, R"sql(
      SELECT o.message_id, o.biz_key, 0,
             EXISTS (SELECT 1 FROM acc.processed_messages m WHERE m.message_id = o.message_id), 0
      FROM main.outbox o
      WHERE o.status = 'SENT' AND o.biz_type = 'payment'
        AND NOT EXISTS (SELECT 1 FROM acc.vouchers v WHERE v.payment_id = o.biz_key)
      ORDER BY o.id)sql");
        if (archive) {
          for (RepairCandidate& c : Candidates(db, acc, R"sql(
        SELECT a.message_id, a.biz_key, a.rowid,
               EXISTS (SELECT 1 FROM acc.processed_messages m WHERE m.message_id = a.message_id),
               EXISTS (SELECT 1 FROM main.outbox o
                       WHERE o.message_id = a.message_id
                          OR (o.biz_type = a.biz_type AND o.biz_key = a.biz_key))
        FROM main.outbox_archive a
        WHERE a.biz_type = 'payment'
          AND NOT EXISTS (SELECT 1 FROM acc.vouchers v WHERE v.payment_id = a.biz_key)
        ORDER BY a.rowid)sql")) {
            found.sent_without_voucher.push_back(std::move(c));
          }
        }
        found.failed_with_voucher = Candidates(db, acc, R"sql(
      SELECT o.message_id, o.biz_key, 0, 0, 0 FROM main.outbox o
      WHERE o.status = 'FAILED' AND o.biz_type = 'payment'
        AND EXISTS (SELECT 1 FROM acc.vouchers v WHERE v.payment_id = o.biz_key)
      ORDER BY o.id)sql");
        tx.commit();
      });
  if (!s.ok()) return s;
  return found;
}

absl::StatusOr<Report> RunChecksOnFiles(const CheckConfig& config, absl::Time now) {
  Report report;
  report.payment_db = config.payment_db;
  report.accounting_db = config.accounting_db;
  report.now = now;
  absl::Status s = WithDatabases(
      config, [&](SQLite::Database& db, const AccountingTables& acc, std::string* step) {
        // Each read transaction sees one WAL snapshot per database, taken when it
        // first reads that database. The services commit payment -> voucher ->
        // SENT in that order, so a voucher is only judged against a payment
        // snapshot taken after it (else a payment committed in between looks
        // missing), and a SENT row against a voucher snapshot taken after it.
        // With shards, the first statement reads every accounting.db.
        *step = "check (accounting snapshot first)";
        CheckAccountingFirst(db, config, acc, report);
        *step = "check (payment snapshot first)";
        CheckPaymentFirst(db, config, acc, now, report);
      });
  if (!s.ok()) return s;
  return report;
}

bool UsesPg(const CheckConfig& config) {
  if (IsPgDatabase(config.payment_db)) return true;
  for (const std::string& db : SplitAccountingDbs(config.accounting_db)) {
    if (IsPgDatabase(db)) return true;
  }
  return false;
}

// A SQLite file's copy in one read transaction (SQLite's backup), so that
// it takes its place in the order of the snapshots below.
absl::Status CopySqliteDatabase(const std::string& path, const char* what,
                                const std::string& copy) {
  absl::StatusOr<std::string> uri = ReadOnlyUri(path, what);
  if (!uri.ok()) return uri.status();
  try {
    SQLite::Database db(*uri, SQLite::OPEN_READONLY | SQLite::OPEN_URI);
    db.setBusyTimeout(5000);
    db.backup(copy.c_str(), SQLite::Database::Save);
  } catch (const SQLite::Exception& e) {
    return FromSqlite(e, absl::StrCat("copy ", path));
  }
  return absl::OkStatus();
}

// The configuration with each database replaced by a copy in `dir`
// (pg_copy.h; a SQLite file beside a PostgreSQL database copied too),
// taken in the order the checks need: payment's snapshot, then each of
// accounting's; `again` is payment's once more, taken after accounting's.
struct Copies {
  CheckConfig first;
  CheckConfig again;
};

absl::StatusOr<Copies> CopyDatabases(const CheckConfig& config, const CopyDir& dir) {
  if (!dir.ok()) return absl::InternalError("cannot make a directory for the PostgreSQL copies");
  auto copy_payment = [&](const std::string& to) {
    return IsPgDatabase(config.payment_db)
               ? CopyPgDatabase(config.payment_db, PgSide::kPayment, to)
               : CopySqliteDatabase(config.payment_db, "payment db", to);
  };
  Copies copies;
  copies.first = config;
  copies.first.payment_db = dir.File("payment.db");
  if (absl::Status s = copy_payment(copies.first.payment_db); !s.ok()) return s;
  std::vector<std::string> accounting = SplitAccountingDbs(config.accounting_db);
  if (accounting.size() > kMaxAccountingDbs) return AccountingUris(accounting).status();
  for (size_t k = 0; k < accounting.size(); ++k) {
    const std::string path = dir.File(absl::StrCat("accounting", k, ".db"));
    absl::Status s = IsPgDatabase(accounting[k])
                         ? CopyPgDatabase(accounting[k], PgSide::kAccounting, path)
                         : CopySqliteDatabase(accounting[k], "accounting db", path);
    if (!s.ok()) return s;
    accounting[k] = path;
  }
  copies.first.accounting_db = absl::StrJoin(accounting, ",");
  copies.again = copies.first;
  copies.again.payment_db = dir.File("payment_again.db");
  if (absl::Status s = copy_payment(copies.again.payment_db); !s.ok()) return s;
  return copies;
}

std::string DisplayAccounting(const std::string& accounting_db) {
  std::vector<std::string> names;
  for (const std::string& db : SplitAccountingDbs(accounting_db)) names.push_back(DisplayName(db));
  return absl::StrJoin(names, ",");
}

}  // namespace

absl::StatusOr<RepairCandidates> FindRepairCandidates(const CheckConfig& config) {
  if (!UsesPg(config)) return FindRepairCandidatesOnFiles(config);
  // Payment's snapshot first, as on SQLite files.
  const CopyDir dir;
  absl::StatusOr<Copies> copies = CopyDatabases(config, dir);
  if (!copies.ok()) return copies.status();
  return FindRepairCandidatesOnFiles(copies->first);
}

absl::StatusOr<Report> RunChecks(const CheckConfig& config, absl::Time now) {
  if (!UsesPg(config)) return RunChecksOnFiles(config, now);
  if (absl::Status prefix = ValidatePaymentIdPrefix(config.payment_id_prefix); !prefix.ok()) {
    return prefix;
  }
  // The checks run on the copies. As on files (see RunChecksOnFiles), a
  // voucher is judged against a payment snapshot taken after accounting's
  // (the second copy of payment), every other check against payment's
  // first, taken before accounting's.
  const CopyDir dir;
  absl::StatusOr<Copies> copies = CopyDatabases(config, dir);
  if (!copies.ok()) return copies.status();
  absl::StatusOr<Report> report = RunChecksOnFiles(copies->first, now);
  if (!report.ok()) return report.status();
  absl::StatusOr<Report> later = RunChecksOnFiles(copies->again, now);
  if (!later.ok()) return later.status();
  for (CheckResult& check : report->checks) {
    if (const CheckResult* judged = later->Find(check.name);
        judged != nullptr && check.name == "voucher_without_payment") {
      check = *judged;
    }
  }
  report->payment_db = DisplayName(config.payment_db);
  report->accounting_db = DisplayAccounting(config.accounting_db);
  return report;
}

}  // namespace outbox::checker
