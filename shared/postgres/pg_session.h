#pragma once

// One PostgreSQL connection shared by a store's callers, one transaction at
// a time: each call takes the mutex, runs its statements between BEGIN and
// COMMIT, and leaves the connection idle. A link found broken at BEGIN is
// opened again at once, one that broke during a transaction by the next
// call, so a store outlives a restart of its server or a failover to its
// standby (the connection string names both).
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "shared/base/internal/mutex.h"
#include "shared/postgres/pg_connection.h"

namespace outbox {

class PgSession {
 public:
  // Connects now (PgConnection::Open's errors).
  static absl::StatusOr<std::unique_ptr<PgSession>> Open(absl::string_view conninfo,
                                                         PgConnection::Options options = {});

  // Runs `body` in one READ COMMITTED transaction; an error it returns rolls
  // everything back and is returned. A serialization failure or a deadlock
  // (ABORTED) runs it again from the start, up to 3 times in all, so `body`
  // resets what it collects. UNAVAILABLE when the link is gone (connecting
  // again failed, or it broke during the transaction: a COMMIT cut off may
  // have committed or not); connecting again refused is
  // PgConnection::Open's error (UNAUTHENTICATED for the credentials). `what` names the transaction
  // in errors. Never with the connection string's password (RedactConninfo).
  absl::Status Transaction(absl::string_view what,
                           const std::function<absl::Status(PgConnection&)>& body);

  // The connection string without its password (RedactConninfo).
  const std::string& redacted() const { return redacted_; }

 private:
  PgSession(std::string conninfo, PgConnection::Options options,
            std::unique_ptr<PgConnection> conn);
  absl::Status RunOnce(absl::string_view what,
                       const std::function<absl::Status(PgConnection&)>& body)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string conninfo_;
  const std::string redacted_;
  const PgConnection::Options options_;
  Mutex mu_;
  std::unique_ptr<PgConnection> conn_ ABSL_GUARDED_BY(mu_);
};

}  // namespace outbox
