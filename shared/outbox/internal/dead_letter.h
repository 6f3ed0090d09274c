#pragma once

// The one path for a delivery that can never be processed (undecodable,
// invalid, a change the store refuses for good, or its reply cannot be
// routed): one log line, a count, and a reject without requeue, so the
// broker parks it in DeadLetterQueueOf(queue). Requeueing it would fail the
// same way forever. The alert is raised by recovery_service while the
// dead-letter queue holds messages (OutboxDeadLetters), and resolved once
// they are re-driven or purged.
#include <exception>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/transport.h"

namespace outbox {

// outbox_dead_lettered_total{queue=...}, registered here only so the
// services that dead-letter share one help text.
Counter& DeadLetteredCounter(MetricsRegistry& metrics, const std::string& queue);
// outbox_unauthenticated_messages_total{queue=...}: of those, the ones whose
// signature was missing or wrong (message_auth.h): forged or misconfigured.
Counter& UnauthenticatedCounter(MetricsRegistry& metrics, const std::string& queue);

// Returns the reject's status (a broker error), OK otherwise.
absl::Status DeadLetter(MessageConsumer& consumer, Counter& dead_lettered, const std::string& queue,
                        const Delivery& delivery, const std::string& why);

// Whether a store's error says it cannot write at all, whatever the
// message: busy or locked (UNAVAILABLE), a full disk or a quota
// (RESOURCE_EXHAUSTED), a damaged file (DATA_LOSS); SqliteError
// (shared/sqlite/sqlite_file.h) maps SQLite's codes so. What it refused is
// held and written again later, never dead-lettered. Any other error is the
// message's own (a constraint, a missing table, an adopter's error): the
// message that fails alone is dead-lettered.
bool StoreUnavailable(const absl::Status& s);

// Runs `fn`, a call into an adopter's code (a handler, a decoder, a
// repository), and returns what it returns; an exception it throws comes
// back as an INTERNAL error naming `what`, handled like any other error
// instead of ending the process.
template <typename Fn>
auto CatchThrown(const char* what, Fn&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(what, " threw: ", e.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat(what, " threw"));
  }
}

}  // namespace outbox
