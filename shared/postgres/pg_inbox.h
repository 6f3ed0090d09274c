#pragma once

// A consumer's inbox in PostgreSQL, the counterpart of Inbox and
// SqliteProcessedLog (shared/sqlite/inbox.h): the ids of the messages it
// has applied, each with the business key and the reference of what it
// made, recorded in the same transaction as the change the message caused.
// A message id found here is a duplicate: nothing is applied again and the
// reply names the same reference. Pruned by age (ProcessedLog) once no copy
// can still arrive. The table is CreatePgInboxTable's (pg_schema.h).
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "shared/outbox/repository.h"
#include "shared/postgres/pg_connection.h"
#include "shared/postgres/pg_session.h"

namespace outbox {

class PgInbox final : public ProcessedLog {
 public:
  // `session` (for pruning) outlives this; `table` is the inbox's name.
  explicit PgInbox(PgSession& session, std::string table = "inbox")
      : session_(session), table_(std::move(table)) {}

  // The consumer's step, inside its transaction on `conn`:
  // the reference recorded for `message_id`, or nullopt if it is new.
  absl::StatusOr<std::optional<std::string>> Find(PgConnection& conn,
                                                  const std::string& message_id) const;
  // Records `message_id` as applied at `processed_at_ms`. ALREADY_EXISTS
  // when it is there: another consumer applied a copy of it and committed
  // first (its insert waited for that commit), so the caller rolls back and
  // answers as for a duplicate.
  absl::Status Record(PgConnection& conn, const std::string& message_id, const std::string& biz_key,
                      const std::string& reference, int64_t processed_at_ms) const;

  // The step of several consumers sharing this inbox: records
  // `message_id` with `reference` unless it is there, and says whether it
  // did. While another transaction holds an uncommitted record of the same
  // id, this waits for it: false once that one committed (Find then returns
  // its reference), true if it rolled back.
  absl::StatusOr<bool> Claim(PgConnection& conn, const std::string& message_id,
                             const std::string& biz_key, const std::string& reference,
                             int64_t processed_at_ms) const;
  // The reference of `message_id`, claimed in this transaction.
  absl::Status SetReference(PgConnection& conn, const std::string& message_id,
                            const std::string& reference) const;

  // The same steps for many ids, each in one statement.
  // The references recorded for those of `message_ids` found, by id.
  absl::StatusOr<std::map<std::string, std::string>> FindAll(
      PgConnection& conn, const std::vector<std::string>& message_ids) const;
  struct ClaimRow {
    std::string message_id;
    std::string biz_key;
    std::string reference;
  };
  // Claim of each row, taken in message id order (consumers claiming
  // overlapping ids wait on each other, never deadlock); the ids claimed.
  absl::StatusOr<std::set<std::string>> ClaimAll(PgConnection& conn,
                                                 const std::vector<ClaimRow>& rows,
                                                 int64_t processed_at_ms) const;
  // SetReference of each (message id, reference); the ids are distinct.
  absl::Status SetReferences(
      PgConnection& conn, const std::vector<std::pair<std::string, std::string>>& references) const;

  // ProcessedLog: up to `limit` ids processed before `cutoff_ms`, oldest
  // first through the processed_at index, in one transaction.
  absl::StatusOr<int> PruneProcessed(int64_t cutoff_ms, int limit) override;

 private:
  PgSession& session_;
  const std::string table_;
};

}  // namespace outbox
