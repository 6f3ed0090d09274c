#include "shared/observability/metrics.h"

#include "prometheus/metric_family.h"
#include "prometheus/text_serializer.h"

namespace outbox {

const std::vector<double>& LatencyBuckets() {
  static const std::vector<double> kBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                               0.5,   1,      2.5,   5,    10,    30,   60};
  return kBuckets;
}

// The series read when scraped, one family per name in registration order.
class ScrapedSeries final : public prometheus::Collectable {
 public:
  using Read = std::function<std::vector<MetricsRegistry::Sample>()>;

  void Add(const std::string& name, const std::string& help, prometheus::MetricType type,
           Read read) {
    MutexLock lock(&mu_);
    for (Family& f : families_) {
      if (f.name != name) continue;
      f.reads.push_back(std::move(read));
      return;
    }
    families_.push_back(Family{name, help, type, {std::move(read)}});
  }

  std::vector<prometheus::MetricFamily> Collect() const override {
    MutexLock lock(&mu_);
    std::vector<prometheus::MetricFamily> out;
    out.reserve(families_.size());
    for (const Family& f : families_) {
      prometheus::MetricFamily family{f.name, f.help, f.type, {}};
      for (const Read& read : f.reads) {
        for (const auto& [labels, value] : read()) {
          prometheus::ClientMetric m;
          for (const auto& [k, v] : labels) m.label.push_back({k, v});
          if (f.type == prometheus::MetricType::Counter) {
            m.counter.value = value;
          } else {
            m.gauge.value = value;
          }
          family.metric.push_back(std::move(m));
        }
      }
      out.push_back(std::move(family));
    }
    return out;
  }

 private:
  struct Family {
    std::string name, help;
    prometheus::MetricType type;
    std::vector<Read> reads;
  };
  mutable Mutex mu_;
  std::vector<Family> families_ ABSL_GUARDED_BY(mu_);
};

MetricsRegistry::MetricsRegistry() : MetricsRegistry(Labels{}) {}

MetricsRegistry::MetricsRegistry(Labels constant_labels)
    : constant_labels_(std::move(constant_labels)),
      registry_(std::make_shared<prometheus::Registry>()),
      scraped_(std::make_shared<ScrapedSeries>()) {}

Labels MetricsRegistry::WithConstant(const Labels& labels) const {
  Labels all = labels;
  for (const auto& [key, value] : constant_labels_) all.emplace(key, value);
  return all;
}

MetricsRegistry::~MetricsRegistry() = default;

Counter& MetricsRegistry::AddCounter(const std::string& name, const std::string& help,
                                     const Labels& labels) {
  // prometheus-cpp hands back the family already registered under `name`.
  prometheus::Counter& c = prometheus::BuildCounter()
                               .Name(name)
                               .Help(help)
                               .Register(*registry_)
                               .Add(WithConstant(labels));
  MutexLock lock(&mu_);
  return counters_.emplace_back(c);
}

DurationHistogram& MetricsRegistry::AddDurationHistogram(const std::string& name,
                                                         const std::string& help,
                                                         const std::vector<double>& buckets,
                                                         const Labels& labels) {
  prometheus::Histogram& h = prometheus::BuildHistogram()
                                 .Name(name)
                                 .Help(help)
                                 .Register(*registry_)
                                 .Add(WithConstant(labels), buckets);
  MutexLock lock(&mu_);
  return histograms_.emplace_back(h);
}

void MetricsRegistry::AddCounterReader(const std::string& name, const std::string& help,
                                       const Labels& labels, std::function<double()> read) {
  auto sample = [labels = WithConstant(labels), read = std::move(read)] {
    return std::vector<Sample>{{labels, read()}};
  };
  scraped_->Add(name, help, prometheus::MetricType::Counter, std::move(sample));
}

void MetricsRegistry::AddGauge(const std::string& name, const std::string& help,
                               const Labels& labels, std::function<double()> read) {
  auto sample = [labels = WithConstant(labels), read = std::move(read)] {
    return std::vector<Sample>{{labels, read()}};
  };
  scraped_->Add(name, help, prometheus::MetricType::Gauge, std::move(sample));
}

void MetricsRegistry::AddGaugeFamily(const std::string& name, const std::string& help,
                                     std::function<std::vector<Sample>()> read) {
  if (constant_labels_.empty()) {
    scraped_->Add(name, help, prometheus::MetricType::Gauge, std::move(read));
    return;
  }
  auto samples = [this, read = std::move(read)] {
    std::vector<Sample> out = read();
    for (Sample& sample : out) sample.first = WithConstant(sample.first);
    return out;
  };
  scraped_->Add(name, help, prometheus::MetricType::Gauge, std::move(samples));
}

std::vector<std::weak_ptr<prometheus::Collectable>> MetricsRegistry::Collectables() const {
  return {registry_, scraped_};
}

std::string MetricsRegistry::Render() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  for (prometheus::MetricFamily& f : scraped_->Collect()) families.push_back(std::move(f));
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace outbox
