#include "shared/observability/metrics.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace outbox {

MetricsRegistry::Family& MetricsRegistry::FamilyFor(const std::string& name,
                                                   const std::string& help,
                                                   const std::string& type) {
  for (Family& f : families_) {
    if (f.name != name) continue;
    if (f.help.empty()) f.help = help;  // a family's help may come with any of its series
    return f;
  }
  families_.push_back(Family{name, help, type, {}});
  return families_.back();
}

Counter& MetricsRegistry::AddCounter(const std::string& name, const std::string& help,
                                     const std::string& labels) {
  MutexLock lock(&mu_);
  Counter& c = counters_.emplace_back();
  FamilyFor(name, help, "counter").series.push_back([&c, labels] {
    return std::vector<Sample>{{labels, static_cast<double>(c.value())}};
  });
  return c;
}

void MetricsRegistry::AddCounterReader(const std::string& name, const std::string& help,
                                       const std::string& labels, std::function<double()> read) {
  MutexLock lock(&mu_);
  FamilyFor(name, help, "counter").series.push_back([read = std::move(read), labels] {
    return std::vector<Sample>{{labels, read()}};
  });
}

void MetricsRegistry::AddGauge(const std::string& name, const std::string& help,
                               const std::string& labels, std::function<double()> read) {
  MutexLock lock(&mu_);
  FamilyFor(name, help, "gauge").series.push_back([read = std::move(read), labels] {
    return std::vector<Sample>{{labels, read()}};
  });
}

void MetricsRegistry::AddGaugeFamily(const std::string& name, const std::string& help,
                                     std::function<std::vector<Sample>()> read) {
  MutexLock lock(&mu_);
  FamilyFor(name, help, "gauge").series.push_back(std::move(read));
}

std::string MetricsRegistry::Render() const {
  MutexLock lock(&mu_);
  std::string out;
  for (const Family& f : families_) {
    absl::StrAppend(&out, "# HELP ", f.name, " ", f.help, "\n# TYPE ", f.name, " ", f.type, "\n");
    for (const auto& read : f.series) {
      for (const auto& [labels, value] : read()) {
        absl::StrAppend(&out, f.name, labels.empty() ? "" : absl::StrCat("{", labels, "}"), " ",
                        absl::StrFormat("%.17g", value), "\n");
      }
    }
  }
  return out;
}

}  // namespace outbox
