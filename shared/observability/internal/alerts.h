#pragma once

// Alerts go to the log at once (error level when raised, info when resolved)
// and, when an Alertmanager URL is configured, to its HTTP API v2 from a
// background thread with retries, so a slow or absent Alertmanager never
// blocks the caller. Alertmanager tells alerts apart by their labels: a
// resolution carries the same labels and an end time of now.
#include <atomic>
#include <deque>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "shared/base/internal/mutex.h"
#include "shared/observability/metrics.h"

namespace outbox {

struct Alert {
  std::string name;  // alertname label, e.g. OutboxMessageFailed
  std::string severity = "critical";
  std::map<std::string, std::string> labels;       // identify the alert
  std::map<std::string, std::string> annotations;  // describe it
  absl::Time starts_at = absl::UnixEpoch();
  absl::Time ends_at = absl::InfiniteFuture();  // InfiniteFuture: not sent (open)
};

// Where the runbooks are unless --runbook_url says otherwise: the page in
// this repository. A deployment that serves its docs points it there.
inline constexpr char kDefaultRunbookBase[] = "docs/operations.md";

// "<base>#<alertname in lower case>": the runbook entry of an alert, the same
// anchor the Prometheus rules' runbook_url annotations use.
std::string RunbookUrl(const std::string& base, const std::string& alertname);

// The JSON body of POST /api/v2/alerts. Every alert carries a runbook_url
// annotation (RunbookUrl(runbook_base, name)) unless it has one.
std::string AlertmanagerJson(const std::vector<Alert>& alerts, const std::string& service,
                             const std::string& runbook_base = kDefaultRunbookBase);

class AlertSink {
 public:
  virtual ~AlertSink() = default;
  // A new alert: logged and sent.
  virtual void Raise(Alert alert) = 0;
  // Its cause is gone: sent with ends_at now (or as given), logged.
  virtual void Resolve(Alert alert) = 0;
  // Still active: sent again without a log line, so that Alertmanager does
  // not let it expire.
  virtual void Refresh(Alert alert) = 0;
};

struct AlerterOptions {
  std::string alertmanager_url;                    // e.g. http://127.0.0.1:9093; empty = log only
  std::string service;                             // label "service"
  std::string runbook_base = kDefaultRunbookBase;  // see RunbookUrl
  int max_delivery_attempts = 8;
  absl::Duration retry_base = absl::Milliseconds(500);
  size_t capacity = 10'000;  // undelivered alerts kept; beyond, dropped and logged
};

class Alerter final : public AlertSink {
 public:
  explicit Alerter(AlerterOptions options);
  ~Alerter() override;

  void Raise(Alert alert) override;
  void Resolve(Alert alert) override;
  void Refresh(Alert alert) override;
  // Tries to deliver what is queued for up to `grace`, then stops.
  void Stop(absl::Duration grace = absl::Seconds(2));

  // outbox_alerts_total{result="delivered"|"failed"}.
  void RegisterMetrics(MetricsRegistry& metrics);

  int64_t raised() const { return raised_.load(); }
  int64_t resolved() const { return resolved_.load(); }
  int64_t delivered() const { return delivered_.load(); }
  int64_t delivery_failures() const { return delivery_failures_.load(); }

 private:
  void Enqueue(Alert alert);
  void Run();

  const AlerterOptions options_;
  std::atomic<int64_t> raised_{0};
  std::atomic<int64_t> resolved_{0};
  std::atomic<int64_t> delivered_{0};
  std::atomic<int64_t> delivery_failures_{0};
  Mutex mu_;
  std::deque<Alert> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time stop_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  std::thread thread_;
};

}  // namespace outbox
