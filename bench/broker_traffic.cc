#include "bench/broker_traffic.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "shared/observability/internal/http_client.h"

namespace outbox::bench {

BrokerTraffic ParseBrokerTraffic(absl::string_view text) {
  BrokerTraffic out;
  double acks = 0, ack_messages = 0;
  bool has_acks = false, has_ack_messages = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    const size_t space = line.rfind(' ');
    double value = 0;
    if (space == absl::string_view::npos || !absl::SimpleAtod(line.substr(space + 1), &value)) {
      continue;
    }
    const absl::string_view series = line.substr(0, space);
    if (series == "outbox_fast_publish_total{result=\"confirmed\"}") {
      out.events = value;
    } else if (series == "outbox_ack_messages_total" ||
               absl::StartsWith(series, "outbox_ack_messages_total{")) {
      ack_messages += value;
      has_ack_messages = true;
    } else if (absl::StartsWith(series, "outbox_acks_total{")) {
      acks += value;
      has_acks = true;
    }
  }
  if (has_ack_messages) {
    out.replies = ack_messages;
  } else if (has_acks) {
    out.replies = acks;
  }
  return out;
}

absl::StatusOr<BrokerTraffic> ReadBrokerTraffic(const std::string& metrics_addr) {
  auto response = HttpGet(absl::StrCat("http://", metrics_addr, "/metrics"), absl::Seconds(5));
  if (!response.ok()) return response.status();
  if (response->status != 200) {
    return absl::UnavailableError(
        absl::StrCat("GET ", metrics_addr, "/metrics answered ", response->status));
  }
  return ParseBrokerTraffic(response->body);
}

}  // namespace outbox::bench
