#pragma once

// Prometheus metrics, registered by the component that counts them and
// rendered in the text exposition format (one HELP/TYPE per family).
#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "shared/base/mutex.h"

namespace outbox {

class Counter {
 public:
  void Add(int64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  int64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

class MetricsRegistry {
 public:
  // `labels` is already formatted, e.g. `result="confirmed"`. Series of one
  // name share one help and type: the first non-empty help given. A family
  // registered from two places takes its help from one constant or one
  // registering function, so texts cannot drift apart. The counter lives as
  // long as the registry.
  Counter& AddCounter(const std::string& name, const std::string& help,
                      const std::string& labels = "");
  // A counter kept elsewhere (a monotonic value), read when scraped.
  void AddCounterReader(const std::string& name, const std::string& help,
                        const std::string& labels, std::function<double()> read);
  // A gauge read when scraped.
  void AddGauge(const std::string& name, const std::string& help, const std::string& labels,
                std::function<double()> read);
  // Several series of one gauge family computed together (e.g. one query).
  using Sample = std::pair<std::string, double>;  // labels, value
  void AddGaugeFamily(const std::string& name, const std::string& help,
                      std::function<std::vector<Sample>()> read);

  std::string Render() const;

 private:
  struct Family {
    std::string name, help, type;
    std::vector<std::function<std::vector<Sample>()>> series;
  };
  Family& FamilyFor(const std::string& name, const std::string& help, const std::string& type)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable Mutex mu_;
  std::deque<Counter> counters_ ABSL_GUARDED_BY(mu_);  // stable addresses
  std::vector<Family> families_ ABSL_GUARDED_BY(mu_);
};

}  // namespace outbox
