#include "shared/postgres/pg_inbox.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"

namespace outbox {

absl::StatusOr<std::optional<std::string>> PgInbox::Find(PgConnection& conn,
                                                         const std::string& message_id) const {
  ASSIGN_OR_RETURN(PgResult r, conn.Query(absl::StrCat("SELECT reference FROM ", table_,
                                                       " WHERE message_id = $1"),
                                          {message_id}));
  if (r.rows() == 0) return std::optional<std::string>();
  return std::optional<std::string>(std::string(r.Get(0, 0)));
}

absl::Status PgInbox::Record(PgConnection& conn, const std::string& message_id,
                             const std::string& biz_key, const std::string& reference,
                             int64_t processed_at_ms) const {
  return conn
      .Query(absl::StrCat("INSERT INTO ", table_,
                          " (message_id, biz_key, reference, processed_at) VALUES ($1, $2, $3, "
                          "$4)"),
             {message_id, biz_key, reference, std::to_string(processed_at_ms)})
      .status();
}

absl::StatusOr<bool> PgInbox::Claim(PgConnection& conn, const std::string& message_id,
                                    const std::string& biz_key, const std::string& reference,
                                    int64_t processed_at_ms) const {
  ASSIGN_OR_RETURN(
      PgResult r,
      conn.Query(absl::StrCat("INSERT INTO ", table_,
                              " (message_id, biz_key, reference, processed_at) VALUES ($1, $2, $3, "
                              "$4) ON CONFLICT (message_id) DO NOTHING RETURNING 1"),
                 {message_id, biz_key, reference, std::to_string(processed_at_ms)}));
  return r.rows() == 1;
}

absl::Status PgInbox::SetReference(PgConnection& conn, const std::string& message_id,
                                   const std::string& reference) const {
  ASSIGN_OR_RETURN(PgResult r, conn.Query(absl::StrCat("UPDATE ", table_,
                                                       " SET reference = $2 WHERE message_id = $1"),
                                          {message_id, reference}));
  if (r.affected() != 1) {
    return absl::InternalError(absl::StrCat("inbox: ", message_id, " was not claimed"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> PgInbox::PruneProcessed(int64_t cutoff_ms, int limit) {
  int pruned = 0;
  RETURN_IF_ERROR(session_.Transaction("prune processed ids", [&](PgConnection& conn) {
    // A bounded batch per transaction, so a consumer's insert waits for one
    // short delete at most.
    ASSIGN_OR_RETURN(
        PgResult r,
        conn.Query(absl::StrCat("WITH gone AS (DELETE FROM ", table_,
                                " WHERE ctid = ANY(ARRAY(SELECT ctid FROM ", table_,
                                " WHERE processed_at < $1 ORDER BY processed_at LIMIT $2)) "
                                "RETURNING 1) SELECT count(*) FROM gone"),
                   {std::to_string(cutoff_ms), std::to_string(limit)}));
    pruned = 0;
    if (!absl::SimpleAtoi(r.Get(0, 0), &pruned)) pruned = 0;
    return absl::OkStatus();
  }));
  return pruned;
}

}  // namespace outbox
