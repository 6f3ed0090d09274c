#pragma once

// Recovery's housekeeping of the dead-letter queues: removes the copies that
// no longer matter. A dead letter is settled when its message's outbox row is
// SENT (a later copy was booked, e.g. after `outboxctl redrive`) and, with
// message signing on, its signature verifies: a forged copy that borrows a
// booked message's id stays parked for an operator to see. Each removal is
// logged, counted and recorded in the audit trail under actor "recovery".
// Anything else (a row SENDING or FAILED, unknown or archived, or a lookup
// that failed) is kept.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "recovery_service/dead_letters.h"
#include "shared/base/clock.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/message.h"
#include "shared/outbox/message_auth.h"
#include "shared/sqlite/audit.h"

namespace outbox::recovery {

class DeadLetterSweep {
 public:
  // The status of the outbox row with this message id (NOT_FOUND: none).
  using RowStatus = std::function<absl::StatusOr<OutboxStatus>(const std::string& message_id)>;
  using RecordAudit = std::function<void(const AuditRecord&)>;
  struct Options {
    std::vector<std::string> queues;  // whose <queue>.DLQ is swept
    // Messages looked at per queue and pass, from the head: kept ones go
    // back in their place, so the next pass looks at them again.
    int per_pass = 100;
  };

  // `keys` null: messages are not signed, and only the row decides.
  DeadLetterSweep(DeadLetters& dead_letters, const MessageKeys* keys, RowStatus row_status,
                  RecordAudit audit, const Clock& clock, MetricsRegistry& metrics, Options options);

  // One pass over every queue; returns how many copies it removed.
  int64_t Run();

  // Whether `d` may be removed.
  bool Settled(const Delivery& d) const;

 private:
  DeadLetters& dead_letters_;
  const MessageKeys* const keys_;
  const RowStatus row_status_;
  const RecordAudit audit_;
  const Clock& clock_;
  const Options options_;
  std::map<std::string, Counter*> removed_;  // by queue
};

}  // namespace outbox::recovery
