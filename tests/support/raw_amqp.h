#pragma once

// What the AMQP adapters do not offer, for tests that look at the broker
// itself: a queue declared with the arguments an earlier release gave it, and
// how often each message of a queue has been delivered.
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace outbox::testing {

// Declares a durable quorum queue with x-queue-type and nothing else: a
// dead-letter queue as releases before x-delivery-limit declared it.
absl::Status DeclarePlainQuorumQueue(const std::string& amqp_url, const std::string& queue);

// Takes every message of `queue` (basic.get, unacknowledged), notes its
// x-delivery-count (0 without the header), then closes the connection, which
// returns them all: this look is one delivery more for each. By message id
// (of several copies of one id, the lowest count).
absl::StatusOr<std::map<std::string, int64_t>> DeliveryCounts(const std::string& amqp_url,
                                                              const std::string& queue);

}  // namespace outbox::testing
