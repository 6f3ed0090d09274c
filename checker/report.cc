#include "checker/report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace outbox::checker {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", c);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  return out + "\"";
}

namespace {

const char* Verdict(const CheckResult& c) {
  if (c.count == 0) return "ok";
  return c.is_violation ? "FAIL" : "warn";
}

}  // namespace

std::string FormatText(const Report& r) {
  const Counts& n = r.counts;
  std::string out = absl::StrFormat(
      "payment_db:    %s\naccounting_db: %s\n"
      "payments:           %d\n"
      "outbox:             SENDING=%d SENT=%d FAILED=%d archived=%d pruned=%d\n",
      r.payment_db, r.accounting_db, n.payments, n.outbox_sending, n.outbox_sent, n.outbox_failed,
      n.outbox_archived, n.outbox_pruned);
  if (r.archive_pruned_before > 0) {
    absl::StrAppendFormat(
        &out, "pruned:             archived rows acknowledged before %s deleted by retention\n",
        absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(r.archive_pruned_before),
                         absl::UTCTimeZone()));
  }
  absl::StrAppendFormat(
      &out,
      "vouchers:           %d\n"
      "processed_messages: %d\n"
      "pending:            sending_with_voucher=%d (accounted, ack not yet processed)\n"
      "checks:\n",
      n.vouchers, n.processed_messages, r.sending_with_voucher);
  int failed = 0;
  for (const CheckResult& c : r.checks) {
    if (c.failed()) ++failed;
    absl::StrAppendFormat(&out, "  %-4s %-28s %8d  %s\n", Verdict(c), c.name, c.count,
                          c.description);
    if (!c.examples.empty()) {
      absl::StrAppend(&out, "       examples (payment_id): ", absl::StrJoin(c.examples, ", "),
                      c.count > static_cast<int64_t>(c.examples.size()) ? ", ..." : "", "\n");
    }
  }
  absl::StrAppend(&out, failed == 0 ? "result: OK\n"
                                    : absl::StrCat("result: VIOLATIONS in ", failed, " check",
                                                   failed == 1 ? "" : "s", "\n"));
  return out;
}

std::string FormatJson(const Report& r) {
  const Counts& n = r.counts;
  std::string out = absl::StrFormat(
      "{\"payment_db\": %s, \"accounting_db\": %s, \"now_ms\": %d, "
      "\"counts\": {\"payments\": %d, \"outbox_sending\": %d, \"outbox_sent\": %d, "
      "\"outbox_failed\": %d, \"outbox_archived\": %d, \"outbox_pruned\": %d, "
      "\"vouchers\": %d, \"processed_messages\": %d}, \"archive_pruned_before_ms\": %d, "
      "\"pending\": {\"sending_with_voucher\": %d}, \"checks\": [",
      JsonString(r.payment_db), JsonString(r.accounting_db), absl::ToUnixMillis(r.now), n.payments,
      n.outbox_sending, n.outbox_sent, n.outbox_failed, n.outbox_archived, n.outbox_pruned,
      n.vouchers, n.processed_messages, r.archive_pruned_before, r.sending_with_voucher);
  for (size_t i = 0; i < r.checks.size(); ++i) {
    const CheckResult& c = r.checks[i];
    std::vector<std::string> examples;
    for (const std::string& e : c.examples) examples.push_back(JsonString(e));
    absl::StrAppendFormat(&out,
                          "%s{\"name\": %s, \"description\": %s, \"count\": %d, "
                          "\"examples\": [%s], \"violation\": %s}",
                          i == 0 ? "" : ", ", JsonString(c.name), JsonString(c.description),
                          c.count, absl::StrJoin(examples, ", "),
                          c.is_violation ? "true" : "false");
  }
  absl::StrAppend(&out, "], \"ok\": ", r.ok() ? "true" : "false", "}\n");
  return out;
}

int RunAndPrint(const CheckConfig& config, absl::Time now, bool json, std::ostream& out,
                std::ostream& err) {
  absl::StatusOr<Report> report = RunChecks(config, now);
  if (!report.ok()) {
    err << "outbox_check: " << report.status().message() << "\n";
    return kExitError;
  }
  out << (json ? FormatJson(*report) : FormatText(*report));
  return report->ok() ? kExitOk : kExitViolation;
}

}  // namespace outbox::checker
