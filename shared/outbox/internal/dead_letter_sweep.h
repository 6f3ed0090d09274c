#pragma once

// Recovery's housekeeping of the dead-letter queues: removes the copies that
// no longer matter. A dead letter is settled when its message's outbox row is
// SENT (a later copy was booked, e.g. after an operator re-drove the row) and,
// with message signing on, its signature verifies: a forged copy that borrows
// a booked message's id stays parked for an operator to see. Each removal is
// logged (dead_letter_settled_removed), counted
// (outbox_dead_letters_settled_removed_total{queue}) and handed to `removed`
// (recovery records it in the audit trail under actor "recovery"). Anything
// else (a row SENDING or FAILED, unknown or archived, or a lookup that
// failed) is kept. The recovery role runs it in its loop's housekeeping.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "shared/base/clock.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/internal/dead_letters.h"
#include "shared/outbox/message_auth.h"
#include "shared/outbox/repository.h"

namespace outbox {

class DeadLetterSweep {
 public:
  // Told of each copy removed, when (unix ms); null: nothing more is done.
  using Removed = std::function<void(const std::string& message_id, int64_t at_ms)>;
  struct Options {
    std::vector<std::string> queues;  // whose <queue>.DLQ is swept
    // Messages looked at per queue and pass, from the head: kept ones go
    // back in their place, so the next pass looks at them again.
    int per_pass = 100;
  };

  // `keys` null: messages are not signed, and only the row decides. `rows`
  // is the producer's outbox (RecoveryRepository::Get).
  DeadLetterSweep(DeadLetters& dead_letters, const MessageKeys* keys, RecoveryRepository& rows,
                  Removed removed, const Clock& clock, MetricsRegistry& metrics, Options options);

  // One pass over every queue; returns how many copies it removed.
  int64_t Run();

  // Whether `d` may be removed.
  bool Settled(const Delivery& d) const;

 private:
  DeadLetters& dead_letters_;
  const MessageKeys* const keys_;
  RecoveryRepository& rows_;
  const Removed removed_callback_;
  const Clock& clock_;
  const Options options_;
  std::map<std::string, Counter*> removed_;  // by queue
};

}  // namespace outbox
