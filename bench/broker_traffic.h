#pragma once

// How many messages cross the broker, as payment_service counts them on its
// /metrics: the events its fast path published (each confirmed) and the
// reply messages its ack listener received. Their sum per payment made is
// the "broker messages per payment" of the report.
#include <cmath>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace outbox::bench {

struct BrokerTraffic {
  double events = NAN;   // outbox_fast_publish_total{result="confirmed"}
  double replies = NAN;  // outbox_ack_messages_total
};

// From the Prometheus text exposition `text`. A build without
// outbox_ack_messages_total sends one reply per acknowledgement: the sum of
// outbox_acks_total then counts its reply messages.
BrokerTraffic ParseBrokerTraffic(absl::string_view text);

// Reads http://`metrics_addr`/metrics.
absl::StatusOr<BrokerTraffic> ReadBrokerTraffic(const std::string& metrics_addr);

}  // namespace outbox::bench
