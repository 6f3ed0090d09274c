#pragma once

// The bench's report: aligned "name  value unit" lines on stdout, and every
// figure kept for one JSON line at the end (--json).
#include <string>
#include <utility>
#include <vector>

namespace outbox::bench {

class Report {
 public:
  void Section(const std::string& title);
  void Line(const std::string& name, const std::string& text);
  void Figure(const std::string& key, double value) { figures_.emplace_back(key, value); }
  void Text(const std::string& key, const std::string& value) { texts_.emplace_back(key, value); }
  void Check(const std::string& what, bool met, const std::string& detail);
  // One object, in the order the figures were taken; a figure that could
  // not be measured (NaN) is null, and each is rounded to 3 decimals.
  std::string Json() const;

 private:
  std::vector<std::pair<std::string, double>> figures_;
  std::vector<std::pair<std::string, std::string>> texts_;
};

// Formatting of one figure; "n/a" when it could not be measured (NaN).
std::string Ms(double v);                        // "12.3 ms"
std::string PerSec(double v, const char* unit);  // "2500 payments/s"
std::string Ratio(double v);                     // "0.81x"
std::string Micros(double v);                    // "212 µs"
double Div(double a, double b);                  // NaN unless b > 0

}  // namespace outbox::bench
