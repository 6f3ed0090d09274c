#include "shared/postgres/pg_session.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace outbox {
namespace {

constexpr int kTries = 3;

absl::Status Annotated(const absl::Status& s, absl::string_view what) {
  return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<PgSession>> PgSession::Open(absl::string_view conninfo,
                                                           PgConnection::Options options) {
  auto conn = PgConnection::Open(conninfo, options);
  if (!conn.ok()) return conn.status();
  return std::unique_ptr<PgSession>(
      new PgSession(std::string(conninfo), std::move(options), std::move(conn).value()));
}

PgSession::PgSession(std::string conninfo, PgConnection::Options options,
                     std::unique_ptr<PgConnection> conn)
    : conninfo_(std::move(conninfo)),
      redacted_(RedactConninfo(conninfo_)),
      options_(std::move(options)),
      conn_(std::move(conn)) {}

absl::Status PgSession::Transaction(absl::string_view what,
                                    const std::function<absl::Status(PgConnection&)>& body) {
  MutexLock lock(&mu_);
  absl::Status s;
  for (int attempt = 1; attempt <= kTries; ++attempt) {
    s = RunOnce(what, body);
    if (!absl::IsAborted(s)) break;
  }
  return s;
}

absl::Status PgSession::RunOnce(absl::string_view what,
                                const std::function<absl::Status(PgConnection&)>& body) {
  bool reopened = false;
  auto reopen = [&]() -> absl::Status {
    conn_.reset();
    auto conn = PgConnection::Open(conninfo_, options_);
    if (!conn.ok()) return Annotated(conn.status(), what);  // Open redacts the string
    conn_ = std::move(conn).value();
    reopened = true;
    return absl::OkStatus();
  };
  if (conn_ == nullptr || !conn_->ok()) {
    if (absl::Status s = reopen(); !s.ok()) return s;
  }
  absl::Status s = conn_->Exec("BEGIN");
  // A link that broke while idle (the server restarted, a failover, an idle
  // timeout) is found by BEGIN, before anything ran: connect once more.
  if (absl::IsUnavailable(s) && !reopened) {
    if (absl::Status again = reopen(); !again.ok()) return again;
    s = conn_->Exec("BEGIN");
  }
  if (s.ok()) s = body(*conn_);
  if (s.ok()) {
    s = conn_->Exec("COMMIT");
    return s.ok() ? s : Annotated(s, absl::StrCat(what, " (commit)"));
  }
  // The rollback's own failure (a lost link) leaves the connection !ok(): the
  // next call opens another.
  if (conn_->ok()) conn_->Exec("ROLLBACK").IgnoreError();
  return Annotated(s, what);
}

}  // namespace outbox
