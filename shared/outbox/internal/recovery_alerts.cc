#include "shared/outbox/internal/recovery_alerts.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shared/observability/log.h"
#include "shared/outbox/internal/failure.h"

namespace outbox {
namespace {
constexpr int kMaxFailedAlerts = 1000;  // FAILED rows alerted one by one
constexpr int kMaxRejectAlerts = 100;   // reject groups alerted
}  // namespace

Alert FailedAlert(const OutboxMessage& row, const RecoveryOptions& options) {
  Alert alert;
  alert.name = "OutboxMessageFailed";
  alert.labels = {{"message_id", row.message_id},
                  {options.biz_key_label, row.biz_key},
                  {"biz_type", row.biz_type}};
  alert.annotations = {
      {"summary", absl::StrCat("outbox message ", row.message_id, " for ", row.biz_type, " ",
                               row.biz_key, " failed after ", row.attempts, " attempts")},
      {"attempts", absl::StrCat(row.attempts)},
      {"last_error", row.last_error.empty()
                         ? absl::StrCat("no acknowledgement from ", options.consumer_name)
                         : row.last_error}};
  return alert;
}

RecoveryAlerts::RecoveryAlerts(AlertSink& sink, const Clock& clock, RecoveryOptions options)
    : clock_(clock),
      options_(std::move(options)),
      failed_(sink, clock, options_.alert_resend),
      backlog_(sink, clock, options_.alert_resend),
      dead_letters_(sink, clock, options_.alert_resend),
      rejected_(sink, clock, options_.alert_resend) {}

void RecoveryAlerts::MessageFailed(const OutboxMessage& row) {
  failed_.Add(FailedAlert(row, options_));
}

void RecoveryAlerts::Refresh(RecoveryRepository& outbox, MessagePublisher& broker) {
  RefreshBacklog(outbox);
  RefreshFailed(outbox);
  RefreshRejected(outbox);
  RefreshDeadLetters(broker);
}

size_t RecoveryAlerts::active() const {
  return failed_.active() + backlog_.active() + dead_letters_.active() + rejected_.active();
}

size_t RecoveryAlerts::Forget() {
  return failed_.Forget() + backlog_.Forget() + dead_letters_.Forget() + rejected_.Forget();
}

Alert RejectedAlert(const FailureGroup& group) {
  Alert alert;
  alert.name = "OutboxMessagesRejected";
  alert.severity = "warning";
  alert.labels = {{"failure_group", group.group}, {"topic", group.topic}};
  const int64_t open = group.count - group.acknowledged;
  alert.annotations = {{"summary", absl::StrCat(open, " message(s) to ", group.topic,
                                                " rejected by their consumer: ", group.pattern)},
                       {"count", absl::StrCat(open)},
                       {"example_message_id", group.example_message_id},
                       {"reason", group.example_error}};
  return alert;
}

void RecoveryAlerts::RefreshRejected(RecoveryRepository& outbox) {
  auto groups = outbox.FailureGroups(kMaxRejectAlerts, kFailureRejected);
  if (!groups.ok()) {
    LogWarning("alerts_not_refreshed",
               {KV("alerts", "OutboxMessagesRejected"), KV("error", groups.status().message())});
    return;
  }
  std::vector<Alert> active;
  for (const FailureGroup& g : *groups) {
    if (g.count > g.acknowledged) active.push_back(RejectedAlert(g));
  }
  // Groups with rows not acknowledged come first: the list holds every one
  // of them unless it is full of them.
  const bool complete = groups->size() < static_cast<size_t>(kMaxRejectAlerts) ||
                        groups->back().count == groups->back().acknowledged;
  rejected_.Update(std::move(active), complete);
}

void RecoveryAlerts::RefreshBacklog(RecoveryRepository& outbox) {
  const int64_t created_before =
      clock_.NowMillis() - absl::ToInt64Milliseconds(options_.backlog_age);
  auto backlog = outbox.CountSendingOlderThan(created_before);
  if (!backlog.ok()) {
    LogWarning("alerts_not_refreshed",
               {KV("alerts", "OutboxBacklog"), KV("error", backlog.status().message())});
    return;
  }
  std::vector<Alert> active;
  if (*backlog > options_.backlog_threshold) {
    Alert alert;
    alert.name = "OutboxBacklog";
    alert.severity = "warning";
    alert.annotations = {
        {"summary", absl::StrCat(*backlog, " outbox rows have been SENDING for more than ",
                                 absl::FormatDuration(options_.backlog_age))},
        {"count", absl::StrCat(*backlog)},
        {"threshold", absl::StrCat(options_.backlog_threshold)}};
    active.push_back(std::move(alert));
  }
  backlog_.Update(std::move(active));
}

void RecoveryAlerts::RefreshFailed(RecoveryRepository& outbox) {
  auto failed = outbox.ListFailed(kMaxFailedAlerts);
  if (!failed.ok()) {
    LogWarning("alerts_not_refreshed",
               {KV("alerts", "OutboxMessageFailed"), KV("error", failed.status().message())});
    return;
  }
  std::vector<Alert> active;
  for (const OutboxMessage& row : *failed) active.push_back(FailedAlert(row, options_));
  // Past the cap some FAILED rows were not listed: resolve nothing then.
  failed_.Update(std::move(active), failed->size() < static_cast<size_t>(kMaxFailedAlerts));
}

void RecoveryAlerts::RefreshDeadLetters(MessagePublisher& broker) {
  std::vector<Alert> parked;
  bool seen_all = true;
  for (const std::string& queue : options_.dead_letter_sources) {
    const std::string dlq = DeadLetterQueueOf(queue);
    absl::StatusOr<int64_t> depth;  // UNAVAILABLE while not connected
    if (count_dead_letters_) {
      depth = count_dead_letters_(queue);
    } else if (auto state = broker.Inspect(dlq); state.ok()) {
      depth = state->ready;
    } else {
      depth = state.status();
    }
    if (absl::IsNotFound(depth.status())) continue;  // not declared yet: nothing parked
    if (!depth.ok()) {
      seen_all = false;
      continue;
    }
    if (*depth == 0) continue;
    Alert alert;
    alert.name = "OutboxDeadLetters";
    alert.severity = "warning";
    alert.labels = {{"queue", dlq}};
    alert.annotations = {
        {"summary", absl::StrCat(*depth, " messages dead-lettered from ", queue, " wait in ", dlq,
                                 " (ListDeadLetters / RedriveDeadLetters)")},
        {"depth", absl::StrCat(*depth)}};
    parked.push_back(std::move(alert));
  }
  dead_letters_.Update(std::move(parked), seen_all);
}

}  // namespace outbox
