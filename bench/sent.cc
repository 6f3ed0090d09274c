#include "bench/sent.h"

#include <algorithm>
#include <fstream>
#include <iterator>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "accounting/v1/accounting.grpc.pb.h"
#include "bench/report.h"
#include "client/listing.h"
#include "google/protobuf/util/time_util.h"
#include "shared/base/status_macros.h"

namespace outbox::bench {
namespace {

using ::google::protobuf::util::TimeUtil;

constexpr absl::Duration kQueryTimeout = absl::Seconds(30);  // each listing call

}  // namespace

Drained AwaitAllSent(PaymentStub& stub, absl::Duration timeout, absl::Duration poll) {
  Drained out;
  const absl::Time start = absl::Now();
  out.all_sent = client::AwaitNoneSending(stub, nullptr, start + timeout, kQueryTimeout, poll);
  out.after = absl::Now() - start;
  return out;
}

absl::StatusOr<SentResult> CollectSent(PaymentStub& stub, const std::string& measured_prefix) {
  SentResult out;
  int64_t first_sent_ms = INT64_MAX;
  out.first_created_ms = INT64_MAX;
  RETURN_IF_ERROR(client::ForEachPayment(
      stub, ::payment::v1::OUTBOX_STATUS_UNSPECIFIED, kQueryTimeout,
      [&](const ::payment::v1::Payment& p) {
        ++out.all_payments;
        const bool sent = p.outbox().status() == ::payment::v1::SENT;
        if (sent) ++out.all_sent;
        if (!absl::StartsWith(p.idempotency_key(), measured_prefix)) return;
        ++out.measured;
        const int64_t created = TimeUtil::TimestampToMilliseconds(p.created_at());
        out.created_at_ms.push_back(created);
        if (!sent) return;
        ++out.measured_sent;
        const int64_t at = TimeUtil::TimestampToMilliseconds(p.outbox().sent_at());
        out.to_sent_ms.push_back(static_cast<double>(at - created));
        out.first_created_ms = std::min(out.first_created_ms, created);
        out.last_sent_ms = std::max(out.last_sent_ms, at);
        first_sent_ms = std::min(first_sent_ms, at);
        out.sent_at_ms.push_back(at);
      }));

  if (out.measured_sent > 0) {
    const double span_s = static_cast<double>(out.last_sent_ms - out.first_created_ms) / 1000.0;
    out.sustained_per_s = Div(static_cast<double>(out.measured_sent), span_s);
    // Per-second SENT counts, leaving out the partial first and last second.
    const int64_t seconds = (out.last_sent_ms - first_sent_ms) / 1000 + 1;
    std::vector<double> buckets(static_cast<size_t>(seconds), 0);
    for (int64_t at : out.sent_at_ms)
      buckets[static_cast<size_t>((at - first_sent_ms) / 1000)] += 1;
    if (buckets.size() > 2) {
      std::vector<double> full(buckets.begin() + 1, buckets.end() - 1);
      std::sort(full.begin(), full.end());
      out.bucket_min = full.front();
      out.bucket_median = full[full.size() / 2];
    }
  }
  return out;
}

absl::StatusOr<int64_t> AwaitMark(const std::string& path, absl::Time deadline) {
  while (true) {
    std::ifstream in(path);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    int64_t ms = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &ms) && ms > 0) return ms;
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("no time in ", path, " (accounting_service was not restarted?)"));
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

DrainResult MeasureDrain(const SentResult& sent, int64_t mark_ms) {
  DrainResult d;
  int64_t created_before = 0, sent_before = 0, first = INT64_MAX, last = mark_ms;
  for (int64_t at : sent.created_at_ms) (at < mark_ms ? created_before : d.created_after) += 1;
  for (int64_t at : sent.sent_at_ms) {
    if (at < mark_ms) {
      ++sent_before;
      continue;
    }
    ++d.sent_after;
    first = std::min(first, at);
    last = std::max(last, at);
  }
  d.backlog = created_before - sent_before;
  if (d.sent_after == 0) return d;
  d.first_sent_ms = first - mark_ms;
  d.last_sent_ms = last - mark_ms;
  d.per_s = Div(static_cast<double>(d.sent_after), static_cast<double>(d.last_sent_ms) / 1000.0);
  std::vector<double> buckets(static_cast<size_t>((last - first) / 1000 + 1), 0);
  for (int64_t at : sent.sent_at_ms) {
    if (at >= mark_ms) buckets[static_cast<size_t>((at - first) / 1000)] += 1;
  }
  if (buckets.size() > 2) {
    std::vector<double> full(buckets.begin() + 1, buckets.end() - 1);
    std::sort(full.begin(), full.end());
    d.bucket_median = full[full.size() / 2];
  }
  return d;
}

absl::StatusOr<int64_t> CountVouchers(const std::string& addrs,
                                      const client::ChannelSecurity& security) {
  int64_t n = 0;
  for (absl::string_view addr : absl::StrSplit(addrs, ',', absl::SkipEmpty())) {
    auto stub = ::accounting::v1::AccountingService::NewStub(
        client::NewChannel(std::string(addr), security));
    RETURN_IF_ERROR(client::ForEachVoucher(*stub, kQueryTimeout,
                                           [&](const ::accounting::v1::Voucher&) { ++n; }));
  }
  return n;
}

}  // namespace outbox::bench
