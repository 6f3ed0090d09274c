#pragma once

// The one path for a delivery that can never be processed (undecodable,
// invalid, or its reply cannot be routed): one log line, a count, and a
// reject without requeue, so the broker parks it in DeadLetterQueueOf(queue).
// Requeueing it would fail the same way forever. The alert is raised by
// recovery_service while the dead-letter queue holds messages
// (OutboxDeadLetters), and resolved once they are re-driven or purged.
#include <string>

#include "absl/status/status.h"
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

}  // namespace outbox
