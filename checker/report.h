#pragma once

#include <ostream>
#include <string>

#include "absl/time/time.h"
#include "checker/consistency_check.h"

namespace outbox::checker {

constexpr int kExitOk = 0;
constexpr int kExitViolation = 1;
constexpr int kExitError = 2;  // usage or I/O: the databases were not checked

// `s` as a JSON string literal, quotes included.
std::string JsonString(const std::string& s);

std::string FormatText(const Report& report);
// One JSON object: {"payment_db", "accounting_db", "now_ms", "counts",
// "pending", "checks": [{name, description, count, examples, violation}], "ok"}.
std::string FormatJson(const Report& report);

// Everything main does after flag parsing, so tests cover the exit codes.
int RunAndPrint(const CheckConfig& config, absl::Time now, bool json, std::ostream& out,
                std::ostream& err);

}  // namespace outbox::checker
