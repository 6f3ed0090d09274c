#include "shared/postgres/pg_message_handler.h"

#include <algorithm>
#include <map>
#include <set>

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
        // Message i is a copy of message copy_of[i] of this batch (itself if none).
        std::vector<size_t> copy_of(batch.size());
        std::map<std::string, size_t> first_of;  // by message id
        std::vector<size_t> fresh;               // new messages to claim, in delivery order
        // Known before judged: a message applied before is answered as
        // applied, whatever today's rules say.
        for (size_t i = 0; i < batch.size(); ++i) {
          const InboxEntry& e = batch[i];
          Applied& a = applied[i];
          copy_of[i] = first_of.emplace(e.message_id, i).first->second;
          if (copy_of[i] != i) continue;  // answered as its first copy, below
          ASSIGN_OR_RETURN(std::optional<std::string> reference, inbox_.Find(tx, e.message_id));
          if (reference) {
            a.duplicate = true;
            a.reference = std::move(*reference);
            continue;
          }
          ASSIGN_OR_RETURN(reference, FindByKey(tx, options_.applied_by_key, e.key));
          if (reference) {
            // Another message for a change already made: remembered by its
            // id too, nothing applied.
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
          fresh.push_back(i);
        }
        // The claims, in message id order: consumers claiming the same ids
        // take them in one order, so they wait on each other, never
        // deadlock. A claim waits for another consumer's transaction holding
        // the same id; not claimed, that one committed: its copy was applied.
        std::vector<size_t> by_id = fresh;
        std::sort(by_id.begin(), by_id.end(),
                  [&](size_t x, size_t y) { return batch[x].message_id < batch[y].message_id; });
        std::vector<bool> claimed(batch.size(), false);
        for (size_t i : by_id) {
          ASSIGN_OR_RETURN(bool mine, inbox_.Claim(tx, batch[i].message_id, batch[i].key, "", now));
          if (mine) {
            claimed[i] = true;
            continue;
          }
          ASSIGN_OR_RETURN(std::optional<std::string> reference,
                           inbox_.Find(tx, batch[i].message_id));
          if (!reference) {  // pruned meanwhile: look again from the start
            return absl::AbortedError(
                absl::StrCat(batch[i].message_id, " was recorded and pruned"));
          }
          applied[i].duplicate = true;
          applied[i].reference = std::move(*reference);
        }
        // The changes, in delivery order.
        std::set<std::string> keys_applied;  // by this batch
        for (size_t i : fresh) {
          if (!claimed[i]) continue;
          const InboxEntry& e = batch[i];
          Applied& a = applied[i];
          if (!e.key.empty() && keys_applied.count(e.key) > 0) {
            // An earlier message of this batch made the change of this key.
            ASSIGN_OR_RETURN(std::optional<std::string> reference,
                             FindByKey(tx, options_.applied_by_key, e.key));
            if (reference) {
              a.duplicate = true;
              a.reference = std::move(*reference);
              RETURN_IF_ERROR(inbox_.SetReference(tx, e.message_id, a.reference));
              continue;
            }
          }
          absl::StatusOr<std::string> made = CatchThrown(
              "Apply", [&]() -> absl::StatusOr<std::string> { return steps.apply(tx, i); });
          if (!made.ok()) return made.status();
          a.reference = *std::move(made);
          RETURN_IF_ERROR(inbox_.SetReference(tx, e.message_id, a.reference));
          if (!e.key.empty()) keys_applied.insert(e.key);
        }
        // A copy in the same batch is answered as its first copy: a
        // duplicate of what that one made, or refused alike.
        for (size_t i = 0; i < batch.size(); ++i) {
          if (copy_of[i] == i) continue;
          applied[i] = applied[copy_of[i]];
          if (applied[i].rejected_reason.empty() && applied[i].dead_letter_reason.empty()) {
            applied[i].duplicate = true;
          }
        }
        return absl::OkStatus();
      });
  if (!committed.ok()) return Held(committed);
  return applied;
}

}  // namespace outbox::internal
