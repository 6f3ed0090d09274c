#include "shared/outbox/transport.h"

#include <map>

namespace outbox {

absl::Status ConnectLive(BrokerLink& link) {
  absl::Status s = link.Connect();
  if (!s.ok()) return s;
  s = link.Poll(absl::ZeroDuration());
  if (s.ok()) return s;
  link.Reset(s);
  return link.Connect();
}

void RegisterConnectionMetrics(MetricsRegistry& metrics, const std::string& connection,
                               std::function<bool()> up, std::function<int64_t()> drops) {
  const Labels label = {{"connection", connection}};
  metrics.AddGauge("outbox_amqp_connected", "1 while the broker connection is up", label,
                   [up = std::move(up)] { return up() ? 1 : 0; });
  metrics.AddCounterReader("outbox_amqp_connection_drops_total",
                           "broker connections lost (each logged as amqp_connection_lost)", label,
                           [drops = std::move(drops)] { return static_cast<double>(drops()); });
}

void RegisterLinkMetrics(MetricsRegistry& metrics, const BrokerLink& link,
                         const std::string& connection) {
  RegisterConnectionMetrics(
      metrics, connection, [&link] { return link.up(); }, [&link] { return link.drops(); });
}

absl::StatusOr<std::vector<Confirm>> PublishAndConfirm(MessagePublisher& publisher,
                                                       const std::vector<OutgoingMessage>& messages,
                                                       absl::Duration timeout, const Clock& clock) {
  std::vector<Confirm> out(messages.size());
  std::map<uint64_t, size_t> index;  // tag -> message
  for (size_t i = 0; i < messages.size(); ++i) {
    auto tag = publisher.Publish(messages[i]);
    if (!tag.ok()) return tag.status();
    out[i].tag = *tag;
    index[*tag] = i;
  }
  const absl::Time deadline = clock.Now() + timeout;
  std::vector<Confirm> settled;
  while (!index.empty() && clock.Now() < deadline) {
    settled.clear();
    absl::Status s = publisher.ReadConfirms(deadline - clock.Now(), &settled);
    if (!s.ok()) return s;
    for (const Confirm& c : settled) {
      auto it = index.find(c.tag);
      if (it == index.end()) continue;
      out[it->second] = c;
      index.erase(it);
    }
  }
  return out;
}

}  // namespace outbox
