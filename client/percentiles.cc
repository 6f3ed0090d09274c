#include "client/percentiles.h"

#include <algorithm>

namespace outbox::client {

Percentiles Summarize(std::vector<double> values) {
  Percentiles p;
  p.n = values.size();
  if (values.empty()) return p;
  std::sort(values.begin(), values.end());
  auto at = [&](double q) {
    const auto rank = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
    return values[std::min(values.size() - 1, rank == 0 ? 0 : rank - 1)];
  };
  p.p50 = at(0.50);
  p.p99 = at(0.99);
  p.p999 = at(0.999);
  p.max = values.back();
  return p;
}

}  // namespace outbox::client
