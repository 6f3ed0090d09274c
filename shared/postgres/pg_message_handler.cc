#include "shared/postgres/pg_message_handler.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/outbox/internal/dead_letter.h"
#include "shared/postgres/pg_outbox_table.h"

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

// The references applied_by_key names for those of `keys` found, by key.
absl::StatusOr<std::map<std::string, std::string>> FindAllByKey(
    PgConnection& tx, const std::optional<AppliedByKey>& by_key,
    const std::vector<std::string>& keys) {
  std::map<std::string, std::string> found;
  if (!by_key || keys.empty()) return found;
  ASSIGN_OR_RETURN(
      PgResult r,
      tx.Query(absl::StrCat("SELECT ", by_key->key_column, ", ", by_key->reference_column, " FROM ",
                            by_key->table, " WHERE ", by_key->key_column, " = ANY($1::text[])"),
               {PgTextArray(keys)}));
  for (int i = 0; i < r.rows(); ++i) found.emplace(r.Get(i, 0), r.Get(i, 1));
  return found;
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
        std::vector<std::string> first_ids;
        for (size_t i = 0; i < batch.size(); ++i) {
          copy_of[i] = first_of.emplace(batch[i].message_id, i).first->second;
          if (copy_of[i] == i) first_ids.push_back(batch[i].message_id);
        }
        // Known before judged: a message applied before is answered as
        // applied, whatever today's rules say. Each lookup is one statement
        // for the whole batch: by id in the inbox, then by business key.
        ASSIGN_OR_RETURN(auto by_id, inbox_.FindAll(tx, first_ids));
        std::vector<std::string> keys;
        for (size_t i = 0; i < batch.size(); ++i) {
          if (copy_of[i] == i && !by_id.count(batch[i].message_id) && !batch[i].key.empty()) {
            keys.push_back(batch[i].key);
          }
        }
        ASSIGN_OR_RETURN(auto by_key, FindAllByKey(tx, options_.applied_by_key, keys));
        std::vector<PgInbox::ClaimRow> claims;
        std::vector<size_t> fresh;  // new messages to claim, in delivery order
        for (size_t i = 0; i < batch.size(); ++i) {
          if (copy_of[i] != i) continue;  // answered as its first copy, below
          const InboxEntry& e = batch[i];
          Applied& a = applied[i];
          if (auto found = by_id.find(e.message_id); found != by_id.end()) {
            a.duplicate = true;
            a.reference = found->second;
            continue;
          }
          if (auto found = e.key.empty() ? by_key.end() : by_key.find(e.key);
              found != by_key.end()) {
            // Another message for a change already made: remembered by its
            // id too, nothing applied.
            a.duplicate = true;
            a.reference = found->second;
            claims.push_back({e.message_id, e.key, a.reference});
            continue;
          }
          if (std::string reason = steps.rejects(i); !reason.empty()) {
            (steps.answers_rejects(i) ? a.rejected_reason : a.dead_letter_reason) =
                std::move(reason);
            continue;
          }
          fresh.push_back(i);
          claims.push_back({e.message_id, e.key, ""});
        }
        // The claims, in message id order, in one statement: consumers
        // claiming the same ids take them in one order, so they wait on each
        // other, never deadlock. A claim waits for another consumer's
        // transaction holding the same id; not claimed, that one committed:
        // its copy was applied.
        ASSIGN_OR_RETURN(std::set<std::string> claimed, inbox_.ClaimAll(tx, claims, now));
        std::vector<std::string> taken;  // by another consumer meanwhile
        for (size_t i : fresh) {
          if (!claimed.count(batch[i].message_id)) taken.push_back(batch[i].message_id);
        }
        if (!taken.empty()) {
          ASSIGN_OR_RETURN(auto references, inbox_.FindAll(tx, taken));
          for (size_t i : fresh) {
            if (claimed.count(batch[i].message_id)) continue;
            auto found = references.find(batch[i].message_id);
            if (found == references.end()) {  // pruned meanwhile: look again from the start
              return absl::AbortedError(
                  absl::StrCat(batch[i].message_id, " was recorded and pruned"));
            }
            applied[i].duplicate = true;
            applied[i].reference = found->second;
          }
        }
        // The changes, in delivery order: the adopter's step takes the
        // claimed messages in runs of distinct keys; a message whose key an
        // earlier one of this batch changed is looked up by its key first.
        std::vector<std::pair<std::string, std::string>> references;  // for the inbox
        std::set<std::string> keys_applied;                           // by this batch
        std::set<std::string> keys_pending;
        std::vector<size_t> pending;
        auto apply_pending = [&]() -> absl::Status {
          if (pending.empty()) return absl::OkStatus();
          absl::StatusOr<std::vector<std::string>> made =
              CatchThrown("Apply", [&]() -> absl::StatusOr<std::vector<std::string>> {
                return steps.apply(tx, pending);
              });
          if (!made.ok()) return made.status();
          if (made->size() != pending.size()) {
            return absl::InternalError(absl::StrCat("Apply made ", made->size(), " references for ",
                                                    pending.size(), " messages"));
          }
          for (size_t k = 0; k < pending.size(); ++k) {
            applied[pending[k]].reference = std::move((*made)[k]);
            references.emplace_back(batch[pending[k]].message_id, applied[pending[k]].reference);
          }
          keys_applied.insert(keys_pending.begin(), keys_pending.end());
          keys_pending.clear();
          pending.clear();
          return absl::OkStatus();
        };
        for (size_t i : fresh) {
          if (!claimed.count(batch[i].message_id)) continue;
          const InboxEntry& e = batch[i];
          if (!e.key.empty() && keys_pending.count(e.key) > 0) RETURN_IF_ERROR(apply_pending());
          if (!e.key.empty() && keys_applied.count(e.key) > 0) {
            // An earlier message of this batch made the change of this key.
            ASSIGN_OR_RETURN(std::optional<std::string> reference,
                             FindByKey(tx, options_.applied_by_key, e.key));
            if (reference) {
              applied[i].duplicate = true;
              applied[i].reference = std::move(*reference);
              references.emplace_back(e.message_id, applied[i].reference);
              continue;
            }
          }
          pending.push_back(i);
          if (!e.key.empty()) keys_pending.insert(e.key);
        }
        RETURN_IF_ERROR(apply_pending());
        RETURN_IF_ERROR(inbox_.SetReferences(tx, references));
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
