#pragma once

// The wait of a producer that exits (a batch job) for its rows to close,
// the same on every store: Producer::WaitUntilClosed (SqliteOutbox's) and
// PgProducer::WaitUntilClosed poll the store's counts with it.
#include <algorithm>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "shared/base/status_macros.h"
#include "shared/outbox/message.h"

namespace outbox::internal {

// Asks `count` every `poll` until no row is SENDING (each SENT, or FAILED
// for an operator) and returns the counts then; DEADLINE_EXCEEDED, naming
// how many are still SENDING, if `deadline` comes first, and CANCELLED so
// once `stop` (when given; asked at each poll) returns true, e.g.
// ShutdownRequested (shared/runtime/signals.h). Rows close only while an
// AckListener reads the reply queue.
inline absl::StatusOr<OutboxRowCounts> WaitUntilRowsClosed(
    const std::function<absl::StatusOr<OutboxRowCounts>()>& count, absl::Time deadline,
    absl::Duration poll, const std::function<bool()>& stop) {
  while (true) {
    OUTBOX_ASSIGN_OR_RETURN(OutboxRowCounts counts, count());
    if (counts.sending == 0) return counts;
    if (stop && stop()) {
      return absl::CancelledError(absl::StrCat("stopped waiting: ", counts.sending,
                                               " outbox rows still SENDING (", counts.sent,
                                               " SENT, ", counts.failed, " FAILED)"));
    }
    const absl::Time now = absl::Now();  // a real wait: real time
    if (now >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          counts.sending, " outbox rows still SENDING (", counts.sent, " SENT, ", counts.failed,
          " FAILED): is an AckListener reading the reply queue, and is the consumer up?"));
    }
    absl::SleepFor(std::min(poll, deadline - now));
  }
}

}  // namespace outbox::internal
