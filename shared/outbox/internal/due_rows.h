#pragma once

// Recovery's claim decided once for every store (RecoveryRepository's
// ClaimDue and DeferDue, repository.h): the lease fence, the transition of
// each due row (state_machine.h), the changed rows saved in id order, the
// adopter's step for a row turned FAILED and the history events. A store
// gives the row I/O of one transaction (DueRowsTransaction) and runs it.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/outbox/internal/state_machine.h"
#include "shared/outbox/message.h"
#include "shared/outbox/repository.h"
#include "shared/outbox/retry_policy.h"

namespace outbox {

// The row I/O of one transaction of recovery's claim.
class DueRowsTransaction {
 public:
  virtual ~DueRowsTransaction() = default;
  // The recovery lease, held until the commit; nullopt when none was taken.
  virtual absl::StatusOr<std::optional<LeaseState>> LockLease() = 0;
  // Up to `limit` SENDING rows due at `now_ms`, oldest due first, locked.
  virtual absl::StatusOr<std::vector<OutboxMessage>> LoadDue(int64_t now_ms, int limit) = 0;
  virtual absl::Status Save(const OutboxMessage& row) = 0;
  // The adopter's step for a row the claim turned FAILED.
  virtual absl::Status Closed(const OutboxMessage& row) = 0;
  virtual absl::Status AppendHistory(const std::string& message_id, int64_t at_ms,
                                     const std::string& instance, const char* event,
                                     const std::string& detail) = 0;
};

// Runs `body` in one write transaction, which may run more than once.
using DueRowsRunner =
    std::function<absl::Status(const std::function<absl::Status(DueRowsTransaction&)>& body)>;

// The history events of recovery's claim (the names history.h lists).
inline constexpr char kDueEventRepublished[] = "republished";
inline constexpr char kDueEventFailed[] = "failed";

// A due row as a transition left it; `changed` rows were saved.
struct DueRow {
  OutboxMessage row;
  bool changed = false;
};

// In one transaction of `run`: checks the lease fence (when `lease_holder`
// is set), loads up to `limit` due rows, applies `transition` to each (true:
// it changed the row) and saves the changed ones in id order, with the
// adopter's step for those turned FAILED and, with `note_history`, a history
// event each naming the holder (else `instance`). Returns the rows in the
// order loaded.
inline absl::StatusOr<std::vector<DueRow>> TransitionDueRows(
    const DueRowsRunner& run, int64_t now_ms, int limit, const std::string& lease_holder,
    const std::string& instance, const std::function<bool(OutboxMessage&)>& transition,
    bool note_history) {
  std::vector<DueRow> due;
  OUTBOX_RETURN_IF_ERROR(run([&](DueRowsTransaction& tx) -> absl::Status {
    due.clear();  // a transaction run again starts over
    if (!lease_holder.empty()) {
      OUTBOX_ASSIGN_OR_RETURN(std::optional<LeaseState> lease, tx.LockLease());
      if (!lease.has_value() || lease->holder != lease_holder || lease->expires_at <= now_ms) {
        return absl::FailedPreconditionError("recovery lease is not held by this instance");
      }
    }
    OUTBOX_ASSIGN_OR_RETURN(std::vector<OutboxMessage> rows, tx.LoadDue(now_ms, limit));
    for (OutboxMessage& row : rows) due.push_back({std::move(row), false});
    std::vector<const OutboxMessage*> changed;
    for (DueRow& d : due) {
      d.changed = transition(d.row);
      if (d.changed) changed.push_back(&d.row);
    }
    // In id order: rows next to each other in the table share pages, and
    // every writer of several rows locks them in that order.
    std::sort(changed.begin(), changed.end(),
              [](const OutboxMessage* a, const OutboxMessage* b) { return a->id < b->id; });
    for (const OutboxMessage* row : changed) {
      OUTBOX_RETURN_IF_ERROR(tx.Save(*row));
      if (row->status == OutboxStatus::kFailed) OUTBOX_RETURN_IF_ERROR(tx.Closed(*row));
    }
    if (!note_history) return absl::OkStatus();
    const std::string& who = lease_holder.empty() ? instance : lease_holder;
    for (const OutboxMessage* row : changed) {
      if (row->status == OutboxStatus::kFailed) {
        OUTBOX_RETURN_IF_ERROR(
            tx.AppendHistory(row->message_id, now_ms, who, kDueEventFailed,
                             absl::StrCat(row->failure_kind, ": ", row->last_error)));
      } else {
        OUTBOX_RETURN_IF_ERROR(tx.AppendHistory(row->message_id, now_ms, who, kDueEventRepublished,
                                                absl::StrCat("attempt ", row->attempts)));
      }
    }
    return absl::OkStatus();
  }));
  return due;
}

// RecoveryRepository::ClaimDue on a store's transactions.
inline absl::StatusOr<Claimed> ClaimDueRows(const DueRowsRunner& run, int64_t now_ms, int limit,
                                            const std::string& lease_holder,
                                            const std::string& instance,
                                            const RetryPolicy& policy) {
  OUTBOX_ASSIGN_OR_RETURN(
      std::vector<DueRow> due,
      TransitionDueRows(
          run, now_ms, limit, lease_holder, instance,
          [&](OutboxMessage& row) { return OnDue(row, now_ms, policy) != DueAction::kNotDue; },
          /*note_history=*/true));
  Claimed claimed;
  for (DueRow& d : due) {
    if (!d.changed) continue;
    // OnDue turned an exhausted row FAILED; the others stay SENDING.
    (d.row.status == OutboxStatus::kFailed ? claimed.exhausted : claimed.to_publish)
        .push_back(std::move(d.row));
  }
  return claimed;
}

// RecoveryRepository::DeferDue on a store's transactions.
inline absl::StatusOr<int> DeferDueRows(const DueRowsRunner& run, int64_t now_ms, int limit,
                                        const std::string& lease_holder,
                                        const std::string& instance, const RetryPolicy& policy) {
  OUTBOX_ASSIGN_OR_RETURN(std::vector<DueRow> due,
                          TransitionDueRows(
                              run, now_ms, limit, lease_holder, instance,
                              [&](OutboxMessage& row) { return OnHold(row, now_ms, policy); },
                              /*note_history=*/false));
  return static_cast<int>(
      std::count_if(due.begin(), due.end(), [](const DueRow& d) { return d.changed; }));
}

}  // namespace outbox
