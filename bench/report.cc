#include "bench/report.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace outbox::bench {

void Report::Section(const std::string& title) {
  std::printf("\n%s\n", title.c_str());
}

void Report::Line(const std::string& name, const std::string& text) {
  std::printf("  %-44s %s\n", name.c_str(), text.c_str());
}

void Report::Check(const std::string& what, bool met, const std::string& detail) {
  Line(what, absl::StrCat(met ? "MET   " : "MISSED", "  ", detail));
}

std::string Report::Json() const {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& [k, v] : texts_) out[k] = v;
  for (const auto& [k, v] : figures_) {
    out[k] = std::isfinite(v) ? nlohmann::ordered_json(std::round(v * 1000) / 1000)
                              : nlohmann::ordered_json(nullptr);
  }
  return out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string Ms(double v) {
  return std::isfinite(v) ? absl::StrFormat("%.1f ms", v) : "n/a";
}
std::string PerSec(double v, const char* unit) {
  if (!std::isfinite(v)) return "n/a";
  return *unit == '\0' ? absl::StrFormat("%.0f", v) : absl::StrFormat("%.0f %s", v, unit);
}
std::string Ratio(double v) {
  return std::isfinite(v) ? absl::StrFormat("%.2fx", v) : "n/a";
}
std::string Micros(double v) {
  return std::isfinite(v) ? absl::StrFormat("%.0f µs", v) : "n/a";
}
double Div(double a, double b) {
  return b > 0 ? a / b : NAN;
}

}  // namespace outbox::bench
