#include "shared/observability/internal/alerts.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "shared/observability/internal/http_client.h"
#include "shared/observability/log.h"

namespace outbox {

namespace {

constexpr char kRfc3339[] = "%Y-%m-%dT%H:%M:%E3SZ";

std::string LabelText(const Alert& alert) {
  std::string fields;
  for (const auto& [k, v] : alert.labels) absl::StrAppend(&fields, " ", k, "=", v);
  return fields.empty() ? fields : fields.substr(1);
}

}  // namespace

std::string RunbookUrl(const std::string& base, const std::string& alertname) {
  return absl::StrCat(base, "#", absl::AsciiStrToLower(alertname));
}

std::string AlertmanagerJson(const std::vector<Alert>& alerts, const std::string& service,
                             const std::string& runbook_base) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const Alert& a : alerts) {
    std::map<std::string, std::string> labels = a.labels;
    labels["alertname"] = a.name;
    labels["severity"] = a.severity;
    labels["service"] = service;
    std::map<std::string, std::string> annotations = a.annotations;
    annotations.emplace("runbook_url", RunbookUrl(runbook_base, a.name));
    nlohmann::ordered_json alert = {
        {"labels", labels},
        {"annotations", annotations},
        {"startsAt", absl::FormatTime(kRfc3339, a.starts_at, absl::UTCTimeZone())}};
    if (a.ends_at != absl::InfiniteFuture()) {
      alert["endsAt"] = absl::FormatTime(kRfc3339, a.ends_at, absl::UTCTimeZone());
    }
    out.push_back(std::move(alert));
  }
  // Invalid UTF-8 in a label (it comes from message ids and errors) is
  // replaced, not thrown on.
  return out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

Alerter::Alerter(AlerterOptions options) : options_(std::move(options)) {
  if (!options_.alertmanager_url.empty()) thread_ = std::thread([this] { Run(); });
}

Alerter::~Alerter() {
  Stop();
}

void Alerter::RegisterMetrics(MetricsRegistry& metrics) {
  metrics.AddCounterReader("outbox_alerts_total", "alerts by delivery result",
                           {{"result", "delivered"}},
                           [this] { return static_cast<double>(delivered()); });
  metrics.AddCounterReader("outbox_alerts_total", "", {{"result", "failed"}},
                           [this] { return static_cast<double>(delivery_failures()); });
  metrics.AddCounterReader("outbox_alert_events_total", "alerts raised and resolved",
                           {{"event", "raised"}}, [this] { return static_cast<double>(raised()); });
  metrics.AddCounterReader("outbox_alert_events_total", "", {{"event", "resolved"}},
                           [this] { return static_cast<double>(resolved()); });
}

void Alerter::Raise(Alert alert) {
  ++raised_;
  if (alert.starts_at == absl::UnixEpoch()) alert.starts_at = absl::Now();
  LogError(
      "alert",
      {KV("alertname", alert.name), KV("severity", alert.severity), KV("labels", LabelText(alert)),
       KV("summary", alert.annotations.count("summary") ? alert.annotations.at("summary") : "")});
  Enqueue(std::move(alert));
}

void Alerter::Resolve(Alert alert) {
  ++resolved_;
  const absl::Time now = absl::Now();
  if (alert.ends_at == absl::InfiniteFuture() || alert.ends_at > now) alert.ends_at = now;
  if (alert.starts_at == absl::UnixEpoch() || alert.starts_at > alert.ends_at) {
    alert.starts_at = alert.ends_at;
  }
  LogInfo("alert_resolved", {KV("alertname", alert.name), KV("labels", LabelText(alert))});
  Enqueue(std::move(alert));
}

void Alerter::Refresh(Alert alert) {
  if (alert.starts_at == absl::UnixEpoch()) alert.starts_at = absl::Now();
  Enqueue(std::move(alert));
}

void Alerter::Enqueue(Alert alert) {
  if (options_.alertmanager_url.empty()) return;
  MutexLock lock(&mu_);
  if (queue_.size() >= options_.capacity) {
    ++delivery_failures_;
    LogError("alert_dropped", {KV("alertname", alert.name), KV("reason", "queue full")});
    return;
  }
  queue_.push_back(std::move(alert));
}

void Alerter::Stop(absl::Duration grace) {
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    stop_deadline_ = absl::Now() + grace;
  }
  if (thread_.joinable()) thread_.join();
}

void Alerter::Run() {
  const std::string url = absl::StrCat(options_.alertmanager_url, "/api/v2/alerts");
  while (true) {
    std::vector<Alert> batch;
    absl::Time deadline;
    {
      MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !queue_.empty() || stopping_; };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;
      while (!queue_.empty() && batch.size() < 64) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      deadline = stop_deadline_;
    }
    const std::string body = AlertmanagerJson(batch, options_.service, options_.runbook_base);
    bool ok = false;
    for (int attempt = 1; attempt <= options_.max_delivery_attempts && absl::Now() < deadline;
         ++attempt) {
      auto resp = HttpPost(url, "application/json", body, absl::Seconds(5));
      if (resp.ok() && resp->status / 100 == 2) {
        ok = true;
        break;
      }
      const std::string error = resp.ok() ? absl::StrCat("HTTP ", resp->status, " ", resp->body)
                                          : std::string(resp.status().message());
      LogWarning("alert_delivery_retry", {KV("alerts", batch.size()), KV("attempt", attempt),
                                          KV("url", url), KV("error", error)});
      // Wait before retrying, but give up early when asked to stop.
      MutexLock lock(&mu_);
      mu_.AwaitWithDeadline(absl::Condition(&stopping_),
                            std::min(deadline, absl::Now() + options_.retry_base * attempt));
    }
    if (ok) {
      delivered_ += batch.size();
    } else {
      delivery_failures_ += batch.size();
      LogError("alert_delivery_failed", {KV("alerts", batch.size()), KV("url", url),
                                         KV("first_alertname", batch.front().name)});
    }
  }
}

}  // namespace outbox
