#pragma once

// Prometheus metrics on prometheus-cpp: a thin facade over its Registry, so
// a component registers a series in one call and keeps a reference to it.
// Values kept elsewhere or computed when scraped (an atomic, a query on a
// reader connection) are read by one Collectable of our own. The text
// format, label escaping and the HTTP side are prometheus-cpp's.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "prometheus/collectable.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/labels.h"
#include "prometheus/registry.h"
#include "shared/base/internal/mutex.h"

namespace outbox {

using Labels = prometheus::Labels;  // name -> value; escaped when rendered

class Counter {
 public:
  explicit Counter(prometheus::Counter& counter) : counter_(counter) {}
  void Add(int64_t n = 1) { counter_.Increment(static_cast<double>(n)); }
  int64_t value() const { return static_cast<int64_t>(counter_.Value()); }

 private:
  prometheus::Counter& counter_;
};

// A histogram of durations, in seconds.
class DurationHistogram {
 public:
  explicit DurationHistogram(prometheus::Histogram& histogram) : histogram_(histogram) {}
  // A negative duration (the wall clock stepped back) counts as 0.
  void Observe(absl::Duration d) { histogram_.Observe(std::max(0.0, absl::ToDoubleSeconds(d))); }

 private:
  prometheus::Histogram& histogram_;
};

// Bucket bounds in seconds for the latency histograms: from a millisecond
// (a confirm on a quiet local broker) to a minute (a message that waited for
// recovery's first re-publish).
const std::vector<double>& LatencyBuckets();

class ScrapedSeries;

class MetricsRegistry {
 public:
  MetricsRegistry();
  // Every series registered here also carries `constant_labels`. Two
  // workers of one kind in one process (two relays, two consumers) register
  // the same names: give each a registry of its own with a label that tells
  // them apart (e.g. Labels{{"role", "orders"}}), and serve them together
  // (MetricsServer::Start takes several), or they add to the same series.
  explicit MetricsRegistry(Labels constant_labels);
  ~MetricsRegistry();
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // Series of one name share one help and type: the help given with the
  // family's first series (later ones may pass ""). Registering the same
  // name and labels again returns the same series. Both live as long as the
  // registry.
  Counter& AddCounter(const std::string& name, const std::string& help, const Labels& labels = {});
  DurationHistogram& AddDurationHistogram(const std::string& name, const std::string& help,
                                          const std::vector<double>& buckets = LatencyBuckets(),
                                          const Labels& labels = {});

  // Read when scraped. `read` must be cheap or use its own (reader)
  // connection: it runs on the HTTP server's thread.
  // A counter kept elsewhere (a monotonic value).
  void AddCounterReader(const std::string& name, const std::string& help, const Labels& labels,
                        std::function<double()> read);
  void AddGauge(const std::string& name, const std::string& help, const Labels& labels,
                std::function<double()> read);
  // Several series of one gauge family computed together (e.g. one query).
  using Sample = std::pair<Labels, double>;
  void AddGaugeFamily(const std::string& name, const std::string& help,
                      std::function<std::vector<Sample>()> read);

  // What /metrics serves: the registry and the series read when scraped.
  std::vector<std::weak_ptr<prometheus::Collectable>> Collectables() const;
  // The text exposition of both, as /metrics would serve it (less the HTTP
  // server's own series).
  std::string Render() const;

 private:
  Labels WithConstant(const Labels& labels) const;

  const Labels constant_labels_;
  const std::shared_ptr<prometheus::Registry> registry_;
  const std::shared_ptr<ScrapedSeries> scraped_;
  Mutex mu_;
  std::deque<Counter> counters_ ABSL_GUARDED_BY(mu_);  // stable addresses
  std::deque<DurationHistogram> histograms_ ABSL_GUARDED_BY(mu_);
};

}  // namespace outbox
