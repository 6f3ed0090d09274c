#pragma once

// outbox_check on PostgreSQL: the rows the checks read, copied from a
// payment or accounting PostgreSQL database into a SQLite file with the
// tables of payment.db or accounting.db (the columns the checks use), so
// that the checks of consistency_check.cc run on them unchanged: one
// statement of each check, whichever store holds the rows. Each copy is one
// REPEATABLE READ, READ ONLY transaction: one snapshot of its database.
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace outbox::checker {

// Whether a --payment_db or --accounting_db entry names a PostgreSQL
// database (a postgresql:// or postgres:// URI) rather than a SQLite file.
bool IsPgDatabase(absl::string_view setting);

// The setting for a report or an error: a URI with its password shown as
// "***", a path as it is.
std::string DisplayName(absl::string_view setting);

// --accounting_db split at its commas, a PostgreSQL URI's list of hosts
// (postgresql://h1,h2/db) kept whole.
std::vector<std::string> SplitAccountingDbs(absl::string_view accounting_db);

enum class PgSide { kPayment, kAccounting };

// Copies `side`'s tables from the PostgreSQL database `conninfo` into a new
// SQLite file `path`. FAILED_PRECONDITION when the database lacks a table of
// that side; PgConnection's errors (never with the password) otherwise.
absl::Status CopyPgDatabase(const std::string& conninfo, PgSide side, const std::string& path);

// A private directory for the copies, removed with everything in it.
class CopyDir {
 public:
  CopyDir();
  ~CopyDir();
  CopyDir(const CopyDir&) = delete;
  CopyDir& operator=(const CopyDir&) = delete;
  bool ok() const { return !path_.empty(); }
  std::string File(absl::string_view name) const;

 private:
  std::string path_;
};

}  // namespace outbox::checker
