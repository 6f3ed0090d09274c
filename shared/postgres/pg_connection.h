#pragma once

// A PostgreSQL connection over libpq, its errors as absl::Status. The
// connection string is libpq's own (a postgresql:// URI or key=value pairs),
// so several hosts with target_session_attrs=read-write reach whichever of
// them is the primary now, and a passfile keeps the password out of it.
#include <libpq-fe.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace outbox {

// The connection string for logs: every setting libpq reads from it, as
// key=value pairs, with the password (in the URI's user part or as a
// parameter) shown as "***". A string libpq cannot parse is not echoed.
std::string RedactConninfo(absl::string_view conninfo);

// Whether a store setting (a service's --db, Config::db) names a PostgreSQL
// database rather than a SQLite file: a libpq URI, "postgresql://..." or
// "postgres://...". Anything else is a path.
bool IsPgConninfo(absl::string_view setting);

// The Status of a failed statement, by its SQLSTATE: a lost connection, a
// server shutting down or a node that is no longer the primary (25006,
// read-only transaction) are UNAVAILABLE (connect again); serialization
// failures and deadlocks ABORTED (run the transaction again); a lock not
// had in time (55P03, lock_timeout) UNAVAILABLE; a cancelled statement
// (57014: statement_timeout ran out, or an operator's pg_cancel_backend;
// the library cancels none of its own) DEADLINE_EXCEEDED, its transaction
// rolled back and the connection still good; a unique violation
// ALREADY_EXISTS, other integrity violations FAILED_PRECONDITION; syntax
// and undefined objects INVALID_ARGUMENT; an authorization refused (class
// 28) UNAUTHENTICATED; insufficient resources (class 53: 53100 disk full,
// 53200 out of memory, 53300 too many connections) RESOURCE_EXHAUSTED;
// anything else INTERNAL. The message holds the SQLSTATE and the server's
// text.
absl::Status PgStatus(absl::string_view sqlstate, absl::string_view message);

// A statement's rows, text format.
class PgResult {
 public:
  explicit PgResult(PGresult* result) : result_(result, &PQclear) {}
  int rows() const { return PQntuples(result_.get()); }
  int columns() const { return PQnfields(result_.get()); }
  bool IsNull(int row, int column) const { return PQgetisnull(result_.get(), row, column) != 0; }
  // "" for NULL.
  absl::string_view Get(int row, int column) const {
    return absl::string_view(PQgetvalue(result_.get(), row, column),
                             static_cast<size_t>(PQgetlength(result_.get(), row, column)));
  }
  // The command's count of rows (INSERT, UPDATE, DELETE...), 0 if none.
  int affected() const;

 private:
  friend class PgConnection;
  const PGresult* raw() const { return result_.get(); }

  std::unique_ptr<PGresult, void (*)(PGresult*)> result_;
};

// A parameter of Query: text, or NULL (std::nullopt).
using PgParam = std::optional<std::string>;

class PgConnection {
 public:
  struct Options {
    // Per host tried, unless the connection string sets connect_timeout.
    absl::Duration connect_timeout = absl::Seconds(10);
    // The server's application_name, unless the connection string sets one.
    std::string application_name = "outbox";
    // A link whose data the server has not acknowledged for this long is
    // dropped (libpq's tcp_user_timeout), and an idle one is probed by TCP
    // keepalives after keepalives_idle, every second, dropped after two
    // unanswered probes; unless the connection string sets them. Without
    // them a connection cut off from its server (a partition, a host gone)
    // waits out TCP's retransmission backoff, tens of seconds, before the
    // session connects again. Zero: the system's.
    absl::Duration tcp_user_timeout = absl::Seconds(3);
    absl::Duration keepalives_idle = absl::Seconds(2);
  };

  // Connects. A connection string libpq cannot parse is INVALID_ARGUMENT,
  // its text not shown (libpq's reason quotes it, a password too). The
  // server refusing the credentials (a wrong or missing password, no
  // pg_hba.conf entry: what no retry mends) is UNAUTHENTICATED; it is told
  // by libpq's "no password supplied" and by the server's English text
  // (lc_messages C or en; in another language it is UNAVAILABLE). Any other
  // failure (no host answers, none is read-write when asked) is UNAVAILABLE.
  // The message names the redacted connection string and libpq's reason,
  // never the password.
  static absl::StatusOr<std::unique_ptr<PgConnection>> Open(absl::string_view conninfo,
                                                            const Options& options);
  static absl::StatusOr<std::unique_ptr<PgConnection>> Open(absl::string_view conninfo) {
    return Open(conninfo, Options());
  }

  PgConnection(const PgConnection&) = delete;
  PgConnection& operator=(const PgConnection&) = delete;
  ~PgConnection();

  // One statement (or several, without parameters), results dropped.
  absl::Status Exec(absl::string_view sql);
  // One statement with $1, $2... bound to `params`.
  absl::StatusOr<PgResult> Query(absl::string_view sql, const std::vector<PgParam>& params = {});

  // Where the connection went: the host (or socket directory) and port of
  // the server it reached.
  std::string host() const;
  int port() const;
  // False once the link is gone (after a statement failed for it).
  bool ok() const;

 private:
  explicit PgConnection(PGconn* conn) : conn_(conn) {}
  absl::Status StatusOf(const PGresult* result) const;

  PGconn* conn_;
};

}  // namespace outbox
