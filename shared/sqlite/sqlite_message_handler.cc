#include "shared/sqlite/sqlite_message_handler.h"

#include "absl/strings/str_cat.h"

namespace outbox::internal {

struct InboxApplier::Statements {
  Statements(SQLite::Database& db, const SqliteHandlerOptions& o) : inbox(db, o.inbox) {
    if (const std::optional<AppliedByKey>& k = o.applied_by_key) {
      by_key.emplace(db, absl::StrCat("SELECT ", k->reference_column, " FROM ", k->table, " WHERE ",
                                      k->key_column, " = ?"));
    }
  }
  // The reference applied_by_key names for `key`, if any.
  std::optional<std::string> FindByKey(const std::string& key) {
    if (!by_key || key.empty()) return std::nullopt;
    by_key->tryReset();
    by_key->bind(1, key);
    std::optional<std::string> reference;
    if (by_key->executeStep()) reference = by_key->getColumn(0).getString();
    by_key->reset();
    return reference;
  }

  Inbox inbox;
  std::optional<SQLite::Statement> by_key;
};

InboxApplier::InboxApplier(SqliteFile& file, const Clock& clock, SqliteHandlerOptions options)
    : file_(file), clock_(clock), options_(std::move(options)) {}

InboxApplier::~InboxApplier() = default;

absl::StatusOr<std::vector<Applied>> InboxApplier::ApplyBatch(const std::vector<Entry>& batch,
                                                              const Steps& steps) {
  std::vector<Applied> applied;
  const int64_t now = clock_.NowMillis();
  // WithWriter, not Write: the kept statements are reset after the
  // transaction, still under the writer's mutex.
  absl::Status committed = file_.WithWriter("apply a batch", [&](SQLite::Database& tx) {
    absl::Status tx_status = WriteTransaction(tx, [&]() -> absl::Status {
      if (statements_ == nullptr) statements_ = std::make_unique<Statements>(tx, options_);
      Statements& s = *statements_;
      applied.assign(batch.size(), Applied{});  // a retried transaction starts over
      for (size_t i = 0; i < batch.size(); ++i) {
        const Entry& e = batch[i];
        Applied& a = applied[i];
        // Known before judged: a message applied before is answered as
        // applied, whatever today's rules say.
        if (std::optional<std::string> reference = s.inbox.Find(e.message_id)) {
          a.duplicate = true;
          a.reference = std::move(*reference);
          continue;
        }
        if (std::optional<std::string> reference = s.FindByKey(e.key)) {
          // Another message for a change already made: remembered by its id
          // too, nothing applied.
          a.duplicate = true;
          a.reference = std::move(*reference);
          s.inbox.Record(e.message_id, e.key, a.reference, now);
          continue;
        }
        if (std::string reason = steps.rejects(i); !reason.empty()) {
          (steps.answers_rejects(i) ? a.rejected_reason : a.dead_letter_reason) = std::move(reason);
          continue;
        }
        absl::StatusOr<std::string> reference = steps.apply(tx, i);
        if (!reference.ok()) return reference.status();
        a.reference = *std::move(reference);
        s.inbox.Record(e.message_id, e.key, a.reference, now);
      }
      return absl::OkStatus();
    });
    // Nothing left mid-step past the transaction: a statement still stepping
    // would hold a read snapshot that refuses every later write.
    if (statements_ != nullptr && statements_->by_key) statements_->by_key->tryReset();
    return tx_status;
  });
  if (!committed.ok()) return committed;
  return applied;
}

}  // namespace outbox::internal
