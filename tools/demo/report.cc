#include "tools/demo/report.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "client/percentiles.h"

namespace outbox::demo {
namespace {

int64_t SetSize(const Config& c, const PaymentSet& set, const Tally& t) {
  return c.report_all ? t.seen : static_cast<int64_t>(set.expected.size());
}

void PrintCreated(const Config& c, const CreatePhase& create, const Checks& checks) {
  const double create_s = absl::ToDoubleSeconds(create.elapsed);
  std::printf("outbox_demo: created %lld / %lld payments in %.2f s (%.0f/s)",
              static_cast<long long>(create.n_created), static_cast<long long>(create.wanted),
              create_s, create.n_created / std::max(1e-9, create_s));
  if (c.retry) {
    std::printf(", %lld calls retried, %lld given up", static_cast<long long>(create.retries),
                static_cast<long long>(create.failed));
  }
  std::printf("\n");
  std::fflush(stdout);  // scripts watch for this line while the snapshot runs
  if (c.checks) {
    std::printf(
        "outbox_demo: replays ok %d / %d, key reuse rejected %s, invalid rejected %d / %zu\n",
        checks.replays_ok, checks.replays, checks.reuse_rejected ? "yes" : "NO",
        checks.invalid_rejected, checks.invalid);
  }
}

bool AllWell(const Config& c, const Checks& checks, const Outcome& o, int64_t not_in_db) {
  const Tally& t = o.tally;
  const VoucherAudit& v = o.vouchers;
  return o.create_ok && (!c.checks || checks.ok()) && o.listed && v.listed && not_in_db == 0 &&
         t.sent == t.seen && v.vouchers == t.seen && v.duplicates == 0 && v.without_voucher == 0 &&
         v.mismatched == 0 && v.orphans == 0 && v.get_ok == v.get_checked;
}

// The creates and the API checks, and which set the report is about.
void PrintRunLines(const Config& c, const CreatePhase& create, const Checks& checks,
                   const PaymentSet& set, const Tally& t) {
  if (c.creating) {
    const client::Percentiles latency = client::Summarize(create.latency_ms);
    auto ms = [](double x) { return std::isnan(x) ? 0.0 : x; };
    std::printf("payments created       %lld / %lld\n", static_cast<long long>(create.n_created),
                static_cast<long long>(create.wanted));
    std::printf("create latency         p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", ms(latency.p50),
                ms(latency.p99), ms(latency.max));
    if (c.retry) {
      std::printf("create retries         %lld calls retried, %lld payments given up\n",
                  static_cast<long long>(create.retries), static_cast<long long>(create.failed));
    }
  }
  if (c.checks) {
    std::printf("replays ok             %d / %d\n", checks.replays_ok, checks.replays);
    std::printf("key reuse rejected     %s\n", checks.reuse_rejected ? "yes" : "NO");
    std::printf("invalid rejected       %d / %zu\n", checks.invalid_rejected, checks.invalid);
  }
  if (c.report_all || set.expected_new > 0) {
    std::printf("payments checked       %lld (%s)\n", static_cast<long long>(SetSize(c, set, t)),
                SetName(c, set).c_str());
  }
  if (set.expected_new > 0) {
    std::printf("acknowledged earlier   %lld (--expect_ids)\n",
                static_cast<long long>(c.expected_ids.size()));
  }
}

// The set's outbox states and vouchers, and what was lost.
void PrintDeliveryLines(const Config& c, const Tally& t, const VoucherAudit& v, int64_t not_in_db) {
  std::printf("outbox SENT            %lld\n", static_cast<long long>(t.sent));
  std::printf("outbox SENDING         %lld\n", static_cast<long long>(t.sending));
  std::printf("outbox FAILED          %lld\n", static_cast<long long>(t.failed));
  std::printf("rows not found         %lld (acknowledged to the client, missing in payment.db)\n",
              static_cast<long long>(not_in_db));
  std::printf("attempts > 1           %lld (re-published by recovery; most attempts %d)\n",
              static_cast<long long>(t.retried), t.max_attempts);
  std::printf("vouchers               %lld\n", static_cast<long long>(v.vouchers));
  std::printf("duplicates             %lld (payments with more than one voucher)\n",
              static_cast<long long>(v.duplicates));
  std::printf("without voucher        %lld\n", static_cast<long long>(v.without_voucher));
  if (c.report_all) {
    std::printf("orphan vouchers        %lld (voucher, but no such payment)\n",
                static_cast<long long>(v.orphans));
  }
  std::printf("voucher mismatches     %lld (+ GetVoucher %d / %d ok)\n",
              static_cast<long long>(v.mismatched), v.get_ok, v.get_checked);
  std::printf("lost                   %lld (rows not found + without voucher)\n",
              static_cast<long long>(not_in_db + v.without_voucher));
}

// How long the creates and the whole delivery took.
void PrintTimingLines(const Config& c, const CreatePhase& create, const Outcome& o) {
  const Tally& t = o.tally;
  const double create_s = absl::ToDoubleSeconds(create.elapsed);
  const bool drained = o.drained_at != absl::InfiniteFuture();
  const absl::Time end = drained ? o.drained_at : absl::Now();
  const double e2e_s = absl::ToDoubleSeconds(end - o.start);
  if (c.creating) {
    std::printf("create phase           %.2f s (%.0f payments/s)\n", create_s,
                create_s > 0 ? create.n_created / create_s : 0.0);
    std::printf("all SENT after         %s%.2f s (%.0f payments/s end to end)\n",
                drained ? "" : "NOT DRAINED, gave up at ", e2e_s, e2e_s > 0 ? t.sent / e2e_s : 0.0);
  } else {
    std::printf("all SENT after         %s%.2f s (since this program started)\n",
                drained ? "" : "NOT DRAINED, gave up at ",
                absl::ToDoubleSeconds(end - o.program_start));
  }
  if (t.sent > 0) {
    std::printf(
        "newest sent_at         %s\n",
        absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t.newest_sent_at, absl::UTCTimeZone()).c_str());
  }
}

}  // namespace

int PrintSnapshot(const Config& c, const CreatePhase& create, const Checks& checks, bool create_ok,
                  payment::v1::PaymentService::StubInterface& stub, PaymentSet& set) {
  if (c.creating) PrintCreated(c, create, checks);
  Tally t;
  if (!TallySet(stub, set, &t)) return 1;
  std::printf(
      "outbox_demo: %s: %lld, SENDING %lld, SENT %lld, FAILED %lld, not found %lld; "
      "attempts > 1: %lld, most attempts %d\n",
      SetName(c, set).c_str(), static_cast<long long>(SetSize(c, set, t)),
      static_cast<long long>(t.sending), static_cast<long long>(t.sent),
      static_cast<long long>(t.failed), static_cast<long long>(t.Missing(set)),
      static_cast<long long>(t.retried), t.max_attempts);
  return create_ok && (!c.checks || checks.ok()) ? 0 : 1;
}

bool PrintReport(const Config& c, const CreatePhase& create, const Checks& checks,
                 const PaymentSet& set, const Outcome& o) {
  const int64_t not_in_db = o.tally.Missing(set);
  const bool ok = AllWell(c, checks, o, not_in_db);
  std::printf("\n=== outbox demo report (%s) ===\n",
              c.creating ? absl::StrCat("run ", o.run_id).c_str() : SetName(c, set).c_str());
  PrintRunLines(c, create, checks, set, o.tally);
  PrintDeliveryLines(c, o.tally, o.vouchers, not_in_db);
  PrintTimingLines(c, create, o);
  std::printf("RESULT                 %s\n", ok ? "OK" : "FAILED");
  return ok;
}

}  // namespace outbox::demo
