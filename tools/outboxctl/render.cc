#include "tools/outboxctl/render.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"

namespace outbox::ctl {
namespace {

using google::protobuf::util::TimeUtil;

constexpr size_t kErrorWidth = 60;  // last_error in a table; `get` shows all of it

std::string Shorten(const std::string& s, size_t width) {
  std::string one_line = s;
  std::replace(one_line.begin(), one_line.end(), '\n', ' ');
  if (one_line.size() <= width) return one_line;
  return one_line.substr(0, width - 3) + "...";
}

std::string OrDash(const std::string& s) {
  return s.empty() ? "-" : s;
}

std::string Attempts(int attempts, int max_attempts) {
  return absl::StrCat(attempts, " of ", max_attempts);
}

}  // namespace

std::string Table(const Row& header, const std::vector<Row>& rows) {
  std::vector<size_t> width(header.size(), 0);
  auto measure = [&](const Row& r) {
    for (size_t i = 0; i < r.size() && i < width.size(); ++i)
      width[i] = std::max(width[i], r[i].size());
  };
  measure(header);
  for (const Row& r : rows) measure(r);
  std::string out;
  auto emit = [&](const Row& r) {
    std::string line;
    for (size_t i = 0; i < r.size() && i < width.size(); ++i) {
      absl::StrAppend(&line, r[i]);
      if (i + 1 < r.size()) line.append(width[i] - r[i].size() + 2, ' ');
    }
    line.erase(line.find_last_not_of(' ') + 1);
    absl::StrAppend(&out, line, "\n");
  };
  emit(header);
  for (const Row& r : rows) emit(r);
  return out;
}

std::string Fields(const std::vector<std::pair<std::string, std::string>>& fields) {
  size_t width = 0;
  for (const auto& [name, value] : fields) width = std::max(width, name.size());
  std::string out;
  for (const auto& [name, value] : fields) {
    absl::StrAppend(&out, name, std::string(width - name.size() + 2, ' '), value, "\n");
  }
  return out;
}

std::string TimeText(const google::protobuf::Timestamp& t, bool set) {
  if (!set) return "-";
  const absl::Time time = absl::FromUnixMillis(TimeUtil::TimestampToMilliseconds(t));
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", time, absl::UTCTimeZone());
}

std::string RenderStats(const ::ops::v1::Stats& s) {
  const std::string oldest =
      s.sending() == 0 ? "-"
                       : absl::FormatDuration(absl::Milliseconds(
                             static_cast<int64_t>(s.oldest_sending_age_seconds() * 1000)));
  const std::string lease =
      s.lease_holder().empty()
          ? "none"
          : absl::StrCat(s.lease_holder(), s.lease_held() ? " (this instance)" : "");
  return Fields({
      {"sending", absl::StrCat(s.sending())},
      {"sent", absl::StrCat(s.sent())},
      {"failed", absl::StrCat(s.failed())},
      {"oldest_sending_age", oldest},
      {"lease_holder", lease},
      {"delivery_hold", s.delivery_hold().empty() ? "none" : s.delivery_hold()},
      {"pay_queue", absl::StrCat(s.pay_queue_ready(), " ready, ", s.pay_queue_consumers(),
                                 " consumer(s), as last seen")},
      {"republished_total", absl::StrCat(s.republished_total())},
      {"publish_failures_total", absl::StrCat(s.publish_failures_total())},
      {"failed_total", absl::StrCat(s.failed_total())},
      {"deferred_total", absl::StrCat(s.deferred_total())},
      {"archived_total", absl::StrCat(s.archived_total())},
      {"alerts_active", absl::StrCat(s.alerts_active())},
      {"alerts_sent_total", absl::StrCat(s.alerts_sent_total())},
      {"alerts_resolved_total", absl::StrCat(s.alerts_resolved_total())},
  });
}

std::string RenderMessages(const std::string& status,
                           const google::protobuf::RepeatedPtrField<::ops::v1::OutboxMessage>& rows,
                           bool more) {
  if (rows.empty()) return absl::StrCat("no ", status, " rows\n");
  std::vector<Row> table;
  for (const auto& m : rows) {
    table.push_back({m.message_id(), m.biz_key(), ::ops::v1::MessageStatus_Name(m.status()),
                     Attempts(m.attempts(), m.max_attempts()),
                     m.status() == ::ops::v1::SENDING
                         ? TimeText(m.next_retry_at(), m.has_next_retry_at())
                         : "-",
                     OrDash(Shorten(m.last_error(), kErrorWidth))});
  }
  return absl::StrCat(
      Table({"MESSAGE_ID", "PAYMENT_ID", "STATUS", "ATTEMPTS", "NEXT_RETRY_AT", "LAST_ERROR"},
            table),
      rows.size(), " ", status, " row(s)", more ? "; more remain (raise --limit)" : "", "\n");
}

std::string RenderMessage(const ::ops::v1::OutboxMessage& m) {
  return Fields({
      {"message_id", m.message_id()},
      {"id", absl::StrCat(m.id())},
      {"status", ::ops::v1::MessageStatus_Name(m.status())},
      {"biz_type", OrDash(m.biz_type())},
      {"biz_key", OrDash(m.biz_key())},
      {"topic", OrDash(m.topic())},
      {"message_type", OrDash(m.message_type())},
      {"reply_to", OrDash(m.reply_to())},
      {"trace_id", OrDash(m.trace_id())},
      {"traceparent", OrDash(m.traceparent())},
      {"attempts", Attempts(m.attempts(), m.max_attempts())},
      {"next_retry_at", TimeText(m.next_retry_at(), m.has_next_retry_at())},
      {"last_attempt_at", TimeText(m.last_attempt_at(), m.has_last_attempt_at())},
      {"last_error", OrDash(m.last_error())},
      {"created_at", TimeText(m.created_at(), m.has_created_at())},
      {"updated_at", TimeText(m.updated_at(), m.has_updated_at())},
      {"sent_at", TimeText(m.sent_at(), m.has_sent_at())},
      {"payload", absl::StrCat(m.payload().size(), " bytes (--json shows them, base64)")},
  });
}

std::string RenderRedriveFailed(const ::ops::v1::RedriveFailedResponse& r) {
  if (r.dry_run()) return absl::StrCat(r.count(), " FAILED row(s) would be re-driven (dry run)\n");
  return absl::StrCat(r.count(), " FAILED row(s) re-driven to SENDING\n");
}

std::string RenderFailureGroups(const ::ops::v1::ListFailureGroupsResponse& r) {
  if (r.groups().empty()) return "no FAILED rows\n";
  std::vector<Row> table;
  for (const auto& g : r.groups()) {
    table.push_back({g.group(), g.topic(), g.kind(), absl::StrCat(g.count()),
                     absl::StrCat(g.acknowledged()), TimeText(g.first_seen(), g.has_first_seen()),
                     TimeText(g.last_seen(), g.has_last_seen()), Shorten(g.pattern(), kErrorWidth),
                     g.example_message_id()});
  }
  return Table({"GROUP", "TOPIC", "KIND", "ROWS", "ACKNOWLEDGED", "FIRST_SEEN", "LAST_SEEN",
                "ERROR", "EXAMPLE"},
               table);
}

std::string RenderAcknowledged(const ::ops::v1::AcknowledgeFailureResponse& r) {
  if (r.dry_run())
    return absl::StrCat(r.count(), " FAILED row(s) would be acknowledged (dry run)\n");
  return absl::StrCat(r.count(),
                      " FAILED row(s) acknowledged: they stay FAILED, their alerts stop\n");
}

std::string RenderHistory(const ::ops::v1::History& h) {
  const auto& m = h.message();
  std::vector<Row> table;
  table.push_back({TimeText(m.created_at(), m.has_created_at()), "-", "created",
                   absl::StrCat(m.biz_type(), " ", m.biz_key(), " -> ", m.topic(),
                                " (attempt 1 published with the commit)")});
  for (const auto& e : h.events()) {
    table.push_back({TimeText(e.at(), e.has_at()), e.instance(), e.event(), e.detail()});
  }
  const std::string status = ::ops::v1::MessageStatus_Name(m.status());
  std::string now = absl::StrCat(status, ", attempts ", Attempts(m.attempts(), m.max_attempts()));
  if (!m.failure_kind().empty()) absl::StrAppend(&now, ", ", m.failure_kind());
  if (!m.last_error().empty()) absl::StrAppend(&now, ": ", m.last_error());
  if (!m.acknowledged_by().empty())
    absl::StrAppend(&now, " (acknowledged by ", m.acknowledged_by(), ")");
  if (m.has_sent_at()) {
    table.push_back({TimeText(m.sent_at(), true), "-", "sent",
                     h.events().empty() ? "acknowledged by the consumer" : "the row is SENT"});
  }
  return absl::StrCat("message ", m.message_id(), "\n",
                      Table({"AT", "BY", "EVENT", "DETAIL"}, table), "now: ", now, "\n");
}

std::string RenderAudit(const ::ops::v1::ListAuditResponse& r) {
  if (r.records().empty()) return "no operator actions recorded\n";
  std::vector<Row> table;
  for (const auto& a : r.records()) {
    table.push_back({absl::StrCat(a.id()), TimeText(a.at(), a.has_at()), a.actor(), a.action(),
                     a.target(), a.dry_run() ? "yes" : "no", absl::StrCat(a.rows()),
                     Shorten(a.outcome(), kErrorWidth), Shorten(a.reason(), kErrorWidth)});
  }
  return Table({"ID", "AT", "ACTOR", "ACTION", "TARGET", "DRY_RUN", "ROWS", "OUTCOME", "REASON"},
               table);
}

std::string RenderRetryPolicy(const ::ops::v1::RetryPolicy& p) {
  auto seconds = [](const google::protobuf::Duration& d) {
    return absl::FormatDuration(absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos()));
  };
  std::vector<Row> table;
  for (const auto& t : p.policies()) {
    const bool no_age = t.max_age().seconds() == 0 && t.max_age().nanos() == 0;
    table.push_back({t.topic().empty() ? "(default)" : t.topic(), seconds(t.base_delay()),
                     seconds(t.max_delay()), absl::StrCat(t.max_attempts()),
                     no_age ? "none" : seconds(t.max_age())});
  }
  return Table({"TOPIC", "BASE_DELAY", "MAX_DELAY", "MAX_ATTEMPTS", "MAX_AGE"}, table);
}

std::string RenderDeadLetters(const std::string& queue,
                              const ::ops::v1::ListDeadLettersResponse& r) {
  std::vector<Row> table;
  for (const auto& d : r.messages()) {
    table.push_back({OrDash(d.message_id()), OrDash(d.type()), absl::StrCat(d.body().size())});
  }
  std::string out = r.messages().empty() ? "" : Table({"MESSAGE_ID", "TYPE", "BYTES"}, table);
  absl::StrAppend(&out, r.total(), " message(s) dead-lettered from ", queue, ", ",
                  r.messages_size(), " shown\n");
  return out;
}

std::string RenderDeadLettersRedriven(const std::string& queue,
                                      const ::ops::v1::RedriveDeadLettersResponse& r) {
  return absl::StrCat(r.count(), " dead-lettered message(s) moved back to ", queue, "\n");
}

std::string RenderPayment(const ::payment::v1::Payment& p) {
  const auto& o = p.outbox();
  return Fields({
      {"payment_id", p.payment_id()},
      {"idempotency_key", p.idempotency_key()},
      {"payer_account", p.payer_account()},
      {"payee_account", p.payee_account()},
      {"amount_minor", absl::StrCat(p.amount_minor())},
      {"currency", p.currency()},
      {"description", OrDash(p.description())},
      {"created_at", TimeText(p.created_at(), p.has_created_at())},
      {"outbox.message_id", o.message_id()},
      {"outbox.status", ::payment::v1::OutboxStatus_Name(o.status())},
      {"outbox.attempts", Attempts(o.attempts(), o.max_attempts())},
      {"outbox.last_attempt_at", TimeText(o.last_attempt_at(), o.has_last_attempt_at())},
      {"outbox.last_error", OrDash(o.last_error())},
      {"outbox.sent_at", TimeText(o.sent_at(), o.has_sent_at())},
      {"outbox.trace_id", OrDash(o.trace_id())},
  });
}

std::string RenderCreatedPayment(const ::payment::v1::CreatePaymentResponse& r) {
  return absl::StrCat(Fields({{"replayed", r.replayed() ? "yes" : "no"}}),
                      RenderPayment(r.payment()));
}

std::string RenderVoucher(const ::accounting::v1::Voucher& v) {
  return Fields({
      {"voucher_id", v.voucher_id()},
      {"payment_id", v.payment_id()},
      {"message_id", v.message_id()},
      {"debit_account", v.debit_account()},
      {"credit_account", v.credit_account()},
      {"amount_minor", absl::StrCat(v.amount_minor())},
      {"currency", v.currency()},
      {"created_at", TimeText(v.created_at(), v.has_created_at())},
      {"trace_id", OrDash(v.trace_id())},
  });
}

std::string ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string out;
  auto status = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) return absl::StrCat("{\"error\":\"cannot print as JSON\"}\n");
  return out + "\n";
}

}  // namespace outbox::ctl
