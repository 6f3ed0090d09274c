#pragma once

// After driving: waits until every payment is SENT, then reads the server's
// own timestamps (created_at, outbox.sent_at) for create->SENT latency and
// the sustained rate at which payments reach SENT; after an accounting
// outage, how fast the backlog drained.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "bench/create_driver.h"
#include "client/channel.h"

namespace outbox::bench {

struct Drained {
  bool all_sent = false;  // no SENDING row left before the deadline
  absl::Duration after;   // from the end of driving until then
};

// `poll`: how often to ask whether anything is still SENDING. Each answer
// sorts the SENDING rows, so while a big backlog drains the asking slows
// payment_service down; the figures come from server timestamps anyway.
Drained AwaitAllSent(PaymentStub& stub, absl::Duration timeout, absl::Duration poll);

struct SentResult {
  int64_t all_payments = 0;  // warm-up and measured, every status
  int64_t all_sent = 0;
  int64_t measured = 0;  // this run's measured payments found
  int64_t measured_sent = 0;
  std::vector<double> to_sent_ms;  // outbox.sent_at - created_at, measured ones
  int64_t first_created_ms = 0;
  int64_t last_sent_ms = 0;
  double sustained_per_s = NAN;        // measured_sent / (last_sent - first_created)
  double bucket_min = NAN;             // SENT per second over the full seconds between
  double bucket_median = NAN;          //   the first and last measured SENT
  std::vector<int64_t> sent_at_ms;     // measured SENT ones
  std::vector<int64_t> created_at_ms;  // measured ones, every status
};

// Lists every payment; those whose idempotency key starts with
// `measured_prefix` are this run's measured ones.
absl::StatusOr<SentResult> CollectSent(PaymentStub& stub, const std::string& measured_prefix);

// Waits until `path` holds a Unix time in ms (written, whole, when
// accounting_service is started again after its outage).
absl::StatusOr<int64_t> AwaitMark(const std::string& path, absl::Time deadline);

struct DrainResult {
  int64_t backlog = 0;         // measured payments created but not SENT when accounting returned
  int64_t sent_after = 0;      // measured payments SENT from then on
  int64_t created_after = 0;   // measured payments created after it (0 when the drive ended first)
  int64_t first_sent_ms = 0;   // from the return to the first SENT after it
  int64_t last_sent_ms = 0;    // from the return to the last SENT
  double per_s = NAN;          // sent_after / last_sent_ms
  double bucket_median = NAN;  // SENT per full second between the first and last SENT after it
};

// The drain from accounting's return at `mark_ms` (Unix ms).
DrainResult MeasureDrain(const SentResult& sent, int64_t mark_ms);

// Vouchers booked on every accounting shard in `addrs` (comma-separated).
absl::StatusOr<int64_t> CountVouchers(const std::string& addrs,
                                      const client::ChannelSecurity& security);

}  // namespace outbox::bench
