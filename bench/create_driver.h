#pragma once

// Drives CreatePayment over real gRPC, closed loop (a fixed number of calls
// in flight) or open loop (a fixed offered rate, latency measured from each
// call's scheduled send time, so a stall is not hidden by the client waiting
// for it). Calls go on one completion queue: one thread issues and completes
// them, so the client costs little CPU on a machine it shares with the
// services and the broker.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "payment/v1/payment.grpc.pb.h"

namespace outbox::bench {

using PaymentStub = ::payment::v1::PaymentService::StubInterface;

struct DriveResult {
  int64_t ok = 0;            // measured calls that succeeded
  int64_t failed = 0;        // measured calls that failed
  int64_t skipped = 0;       // open loop: not sent because --max_in_flight were pending
  int64_t ok_in_window = 0;  // successes completing inside the measured window
  int64_t ok_all = 0;        // every success, warm-up included: the payments made
  std::map<int, int64_t> errors_by_code;
  std::string first_error;
  std::vector<double> latency_ms;  // measured successes
};

class CreateDriver {
 public:
  // ledger: where acknowledged creates are written as
  // "payment_id,amount_minor,message_id" lines; may be null.
  CreateDriver(std::vector<std::unique_ptr<PaymentStub>> stubs, std::string run_tag,
               std::FILE* ledger = nullptr);
  ~CreateDriver();

  // The idempotency-key prefix of the calls in the measured window.
  static std::string MeasuredPrefix(const std::string& run_tag);

  DriveResult ClosedLoop(int concurrency, absl::Duration warmup, absl::Duration duration);
  DriveResult OpenLoop(double rate, absl::Duration warmup, absl::Duration duration,
                       int max_in_flight);

 private:
  struct Call;
  void Issue(absl::Time start, bool measured);
  void Complete(Call* call, absl::Time now, DriveResult* r);

  std::vector<std::unique_ptr<PaymentStub>> stubs_;
  const std::string run_tag_;
  std::FILE* const ledger_;  // written by the completing thread only
  grpc::CompletionQueue cq_;
  std::atomic<int64_t> next_seq_{0};
  absl::Time window_start_;
  absl::Time window_end_;
};

}  // namespace outbox::bench
