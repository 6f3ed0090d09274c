#include "shared/postgres/pg_connection.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "shared/observability/log.h"

namespace outbox {
namespace {

// key=value quoting of libpq: single quotes when the value is empty or has a
// space, a quote or a backslash, which are escaped.
std::string QuoteValue(absl::string_view value) {
  if (!value.empty() && value.find_first_of(" \t\n'\\") == absl::string_view::npos) {
    return std::string(value);
  }
  std::string out = "'";
  for (char c : value) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  out += '\'';
  return out;
}

std::string Trimmed(const char* text) {
  return std::string(absl::StripTrailingAsciiWhitespace(text == nullptr ? "" : text));
}

bool Parses(const std::string& conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &error);
  PQfreemem(error);
  if (options == nullptr) return false;
  PQconninfoFree(options);
  return true;
}

// The server refused the credentials: libpq had no password to send, or
// the server's text (28P01, 28000) says so.
bool CredentialsRefused(PGconn* conn, absl::string_view reason) {
  if (PQconnectionNeedsPassword(conn)) return true;
  for (absl::string_view marker : {"authentication failed for user", "no pg_hba.conf entry",
                                   "pg_hba.conf rejects connection"}) {
    if (absl::StrContains(reason, marker)) return true;
  }
  return false;
}

}  // namespace

bool IsPgConninfo(absl::string_view setting) {
  return absl::StartsWith(setting, "postgresql://") || absl::StartsWith(setting, "postgres://");
}

std::string RedactConninfo(absl::string_view conninfo) {
  char* error = nullptr;
  PQconninfoOption* options = PQconninfoParse(std::string(conninfo).c_str(), &error);
  if (options == nullptr) {
    PQfreemem(error);
    return "(a connection string libpq cannot parse)";
  }
  std::string out;
  for (PQconninfoOption* o = options; o->keyword != nullptr; ++o) {
    if (o->val == nullptr) continue;
    const bool secret = absl::string_view(o->keyword) == "password";
    absl::StrAppend(&out, out.empty() ? "" : " ", o->keyword, "=",
                    secret ? "***" : QuoteValue(o->val));
  }
  PQconninfoFree(options);
  return out;
}

absl::Status PgStatus(absl::string_view sqlstate, absl::string_view message) {
  const std::string text = absl::StrCat("SQLSTATE ", sqlstate, ": ", message);
  const absl::string_view cls = sqlstate.substr(0, 2);
  if (cls == "08" || (cls == "57" && sqlstate != "57014") || sqlstate == "25006") {
    return absl::UnavailableError(text);
  }
  if (sqlstate == "57014") return absl::DeadlineExceededError(text);
  if (sqlstate == "40001" || sqlstate == "40P01") return absl::AbortedError(text);
  // lock_not_available: a lock_timeout or NOWAIT ran out; the same call may succeed later.
  if (sqlstate == "55P03") return absl::UnavailableError(text);
  if (sqlstate == "23505") return absl::AlreadyExistsError(text);
  if (cls == "23") return absl::FailedPreconditionError(text);
  if (cls == "42" || cls == "22") return absl::InvalidArgumentError(text);
  if (cls == "28") return absl::UnauthenticatedError(text);
  if (cls == "53") return absl::ResourceExhaustedError(text);
  return absl::InternalError(text);
}

int PgResult::affected() const {
  int n = 0;
  return absl::SimpleAtoi(PQcmdTuples(result_.get()), &n) ? n : 0;
}

absl::StatusOr<std::unique_ptr<PgConnection>> PgConnection::Open(absl::string_view conninfo,
                                                                 const Options& options) {
  // Later pairs override earlier ones, and the expanded dbname (the
  // connection string) comes last: what it sets wins over the options.
  const std::string timeout =
      std::to_string(std::max<int64_t>(1, absl::ToInt64Seconds(options.connect_timeout)));
  const std::string text(conninfo);
  // libpq's reason for a string it cannot parse quotes the string.
  if (!Parses(text)) {
    return absl::InvalidArgumentError(
        "the PostgreSQL connection string cannot be parsed (not shown: it may hold a password)");
  }
  const std::string user_timeout =
      std::to_string(absl::ToInt64Milliseconds(options.tcp_user_timeout));
  const std::string idle = std::to_string(absl::ToInt64Seconds(options.keepalives_idle));
  const char* keywords[] = {
      "connect_timeout",     "application_name", "tcp_user_timeout", "keepalives_idle",
      "keepalives_interval", "keepalives_count", "dbname",           nullptr};
  const char* values[] = {timeout.c_str(),
                          options.application_name.c_str(),
                          user_timeout.c_str(),
                          idle.c_str(),
                          "1",
                          "2",
                          text.c_str(),
                          nullptr};
  PGconn* conn = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
  if (conn == nullptr) return absl::ResourceExhaustedError("libpq could not allocate a connection");
  if (PQstatus(conn) != CONNECTION_OK) {
    const std::string reason = Trimmed(PQerrorMessage(conn));
    const bool refused = CredentialsRefused(conn, reason);
    PQfinish(conn);
    const std::string message = absl::StrCat(
        refused ? "PostgreSQL refused the credentials (" : "cannot connect to PostgreSQL (",
        RedactConninfo(conninfo), "): ", reason);
    return refused ? absl::UnauthenticatedError(message) : absl::UnavailableError(message);
  }
  // The server's notices would go to stderr, past the process's log: the
  // harmless ones ("relation ... already exists, skipping" of CREATE ... IF
  // NOT EXISTS) are dropped, warnings become log lines.
  PQsetNoticeReceiver(
      conn,
      [](void*, const PGresult* notice) {
        const char* severity = PQresultErrorField(notice, PG_DIAG_SEVERITY_NONLOCALIZED);
        if (severity == nullptr || absl::string_view(severity) != "WARNING") return;
        LogWarning("postgres_warning", {KV("message", Trimmed(PQresultErrorMessage(notice)))});
      },
      nullptr);
  return std::unique_ptr<PgConnection>(new PgConnection(conn));
}

PgConnection::~PgConnection() {
  PQfinish(conn_);
}

absl::Status PgConnection::StatusOf(const PGresult* result) const {
  const ExecStatusType status = result == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(result);
  if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY) {
    return absl::OkStatus();
  }
  // No SQLSTATE: libpq's own failure, the link's in every case that matters
  // (the server gone, the socket closed).
  const char* sqlstate = result == nullptr ? nullptr : PQresultErrorField(result, PG_DIAG_SQLSTATE);
  const std::string message = Trimmed(result != nullptr && *PQresultErrorMessage(result) != '\0'
                                          ? PQresultErrorMessage(result)
                                          : PQerrorMessage(conn_));
  if (sqlstate == nullptr || PQstatus(conn_) == CONNECTION_BAD) {
    return absl::UnavailableError(absl::StrCat("PostgreSQL connection lost: ", message));
  }
  return PgStatus(sqlstate, message);
}

absl::Status PgConnection::Exec(absl::string_view sql) {
  PGresult* result = PQexec(conn_, std::string(sql).c_str());
  absl::Status status = StatusOf(result);
  PQclear(result);
  return status;
}

absl::StatusOr<PgResult> PgConnection::Query(absl::string_view sql,
                                             const std::vector<PgParam>& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const PgParam& p : params) values.push_back(p.has_value() ? p->c_str() : nullptr);
  PgResult result(PQexecParams(conn_, std::string(sql).c_str(), static_cast<int>(values.size()),
                               /*paramTypes=*/nullptr, values.data(), /*paramLengths=*/nullptr,
                               /*paramFormats=*/nullptr, /*resultFormat=*/0));
  absl::Status status = StatusOf(result.raw());
  if (!status.ok()) return status;
  return result;
}

std::string PgConnection::host() const {
  return PQhost(conn_) == nullptr ? "" : PQhost(conn_);
}

int PgConnection::port() const {
  int port = 0;
  return PQport(conn_) != nullptr && absl::SimpleAtoi(PQport(conn_), &port) ? port : 0;
}

bool PgConnection::ok() const {
  return PQstatus(conn_) == CONNECTION_OK;
}

}  // namespace outbox
