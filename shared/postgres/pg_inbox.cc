#include "shared/postgres/pg_inbox.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/postgres/pg_outbox_table.h"

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

absl::StatusOr<std::map<std::string, std::string>> PgInbox::FindAll(
    PgConnection& conn, const std::vector<std::string>& message_ids) const {
  std::map<std::string, std::string> found;
  if (message_ids.empty()) return found;
  ASSIGN_OR_RETURN(PgResult r, conn.Query(absl::StrCat("SELECT message_id, reference FROM ", table_,
                                                       " WHERE message_id = ANY($1::text[])"),
                                          {PgTextArray(message_ids)}));
  for (int i = 0; i < r.rows(); ++i) found.emplace(r.Get(i, 0), r.Get(i, 1));
  return found;
}

absl::StatusOr<std::set<std::string>> PgInbox::ClaimAll(PgConnection& conn,
                                                        const std::vector<ClaimRow>& rows,
                                                        int64_t processed_at_ms) const {
  std::set<std::string> claimed;
  if (rows.empty()) return claimed;
  std::vector<std::string> ids, keys, references;
  for (const ClaimRow& row : rows) {
    ids.push_back(row.message_id);
    keys.push_back(row.biz_key);
    references.push_back(row.reference);
  }
  // The rows go in as the SELECT orders them: by message id.
  ASSIGN_OR_RETURN(
      PgResult r,
      conn.Query(absl::StrCat("INSERT INTO ", table_,
                              " (message_id, biz_key, reference, processed_at) "
                              "SELECT c.id, c.k, c.r, $4 FROM unnest($1::text[], $2::text[], "
                              "$3::text[]) AS c (id, k, r) ORDER BY c.id COLLATE \"C\" "
                              "ON CONFLICT (message_id) DO NOTHING RETURNING message_id"),
                 {PgTextArray(ids), PgTextArray(keys), PgTextArray(references),
                  std::to_string(processed_at_ms)}));
  for (int i = 0; i < r.rows(); ++i) claimed.emplace(r.Get(i, 0));
  return claimed;
}

absl::Status PgInbox::SetReferences(
    PgConnection& conn, const std::vector<std::pair<std::string, std::string>>& references) const {
  if (references.empty()) return absl::OkStatus();
  std::vector<std::string> ids, refs;
  for (const auto& [id, reference] : references) {
    ids.push_back(id);
    refs.push_back(reference);
  }
  ASSIGN_OR_RETURN(PgResult r,
                   conn.Query(absl::StrCat("UPDATE ", table_,
                                           " AS t SET reference = u.r FROM unnest($1::text[], "
                                           "$2::text[]) AS u (id, r) WHERE t.message_id = u.id"),
                              {PgTextArray(ids), PgTextArray(refs)}));
  const int expected = static_cast<int>(references.size());
  if (r.affected() != expected) {
    return absl::InternalError(absl::StrCat("inbox: ", expected - r.affected(), " of ", expected,
                                            " ids were not claimed"));
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
