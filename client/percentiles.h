#pragma once

// Latency summaries, one definition for every load generator.
#include <cmath>
#include <cstddef>
#include <vector>

namespace outbox::client {

struct Percentiles {
  size_t n = 0;
  double p50 = NAN, p99 = NAN, p999 = NAN, max = NAN;  // NaN when n == 0
};

// Nearest-rank percentiles of `values`, in their own unit.
Percentiles Summarize(std::vector<double> values);

}  // namespace outbox::client
