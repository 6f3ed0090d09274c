#include "shared/postgres/pg_message_handler.h"

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/outbox/internal/dead_letter.h"

namespace outbox::internal {
namespace {

// The reference applied_by_key names for `key`, if any.
absl::StatusOr<std::optional<std::string>> FindByKey(PgConnection& tx,
                                                     const std::optional<AppliedByKey>& by_key,
                                                     const std::string& key) {
  if (!by_key || key.empty()) return std::optional<std::string>();
  ASSIGN_OR_RETURN(PgResult r,
                   tx.Query(absl::StrCat("SELECT ", by_key->reference_column, " FROM ",
                                         by_key->table, " WHERE ", by_key->key_column, " = $1"),
                            {key}));
  if (r.rows() == 0) return std::optional<std::string>();
  return std::optional<std::string>(std::string(r.Get(0, 0)));
}

// The session's errors that say the store cannot write now, whatever the
// batch: held by the consumer (UNAVAILABLE), never dead-lettered.
absl::Status Held(const absl::Status& s) {
  if (absl::IsUnauthenticated(s) || absl::IsDeadlineExceeded(s)) {
    return absl::UnavailableError(s.message());
  }
  return s;
}

}  // namespace

PgInboxApplier::PgInboxApplier(PgSession& session, const Clock& clock, PgHandlerOptions options)
    : session_(session),
      clock_(clock),
      options_(std::move(options)),
      inbox_(session, options_.inbox_table) {}

absl::StatusOr<std::vector<Applied>> PgInboxApplier::ApplyBatch(
    const std::vector<InboxEntry>& batch, const Steps& steps) {
  std::vector<Applied> applied;
  const int64_t now = clock_.NowMillis();
  absl::Status committed =
      session_.Transaction("apply a batch", [&](PgConnection& tx) -> absl::Status {
        applied.assign(batch.size(), Applied{});  // a transaction run again starts over
        for (size_t i = 0; i < batch.size(); ++i) {
          const InboxEntry& e = batch[i];
          Applied& a = applied[i];
          // Known before judged: a message applied before is answered as
          // applied, whatever today's rules say.
          ASSIGN_OR_RETURN(std::optional<std::string> reference, inbox_.Find(tx, e.message_id));
          if (reference) {
            a.duplicate = true;
            a.reference = std::move(*reference);
            continue;
          }
          ASSIGN_OR_RETURN(reference, FindByKey(tx, options_.applied_by_key, e.key));
          if (reference) {
            // Another message for a change already made: remembered by its id
            // too, nothing applied.
            a.duplicate = true;
            a.reference = std::move(*reference);
            RETURN_IF_ERROR(inbox_.Claim(tx, e.message_id, e.key, a.reference, now).status());
            continue;
          }
          if (std::string reason = steps.rejects(i); !reason.empty()) {
            (steps.answers_rejects(i) ? a.rejected_reason : a.dead_letter_reason) =
                std::move(reason);
            continue;
          }
          // The claim waits for another consumer's transaction holding the same
          // id; not claimed, that one committed: its copy was applied.
          ASSIGN_OR_RETURN(bool claimed, inbox_.Claim(tx, e.message_id, e.key, "", now));
          if (!claimed) {
            ASSIGN_OR_RETURN(reference, inbox_.Find(tx, e.message_id));
            if (!reference) {  // pruned meanwhile: look again from the start
              return absl::AbortedError(absl::StrCat(e.message_id, " was recorded and pruned"));
            }
            a.duplicate = true;
            a.reference = std::move(*reference);
            continue;
          }
          absl::StatusOr<std::string> made = CatchThrown(
              "Apply", [&]() -> absl::StatusOr<std::string> { return steps.apply(tx, i); });
          if (!made.ok()) return made.status();
          a.reference = *std::move(made);
          RETURN_IF_ERROR(inbox_.SetReference(tx, e.message_id, a.reference));
        }
        return absl::OkStatus();
      });
  if (!committed.ok()) return Held(committed);
  return applied;
}

}  // namespace outbox::internal
