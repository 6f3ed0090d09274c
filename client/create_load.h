#pragma once

// Payments created from several client threads at once: each thread takes
// the next index, builds that payment's request (request.h) and creates it
// with retries (retry.h), until the plan's count or end time is reached.
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "client/retry.h"
#include "payment/v1/payment.grpc.pb.h"
#include "shared/base/internal/mutex.h"

namespace outbox::client {

struct LoadPlan {
  std::string key_prefix;                       // payment i has the key key_prefix + i
  std::string description;                      // of every payment
  int64_t count = 0;                            // payments 0 .. count-1, unless `until` is finite
  absl::Time until = absl::InfiniteFuture();    // finite: new payments until then
  absl::Duration pause = absl::ZeroDuration();  // each thread, after each payment
  int64_t max_failures = 0;                     // > 0: no payment starts once this many have failed
  RetryPolicy retry;
};

// One payment tried.
struct Created {
  int64_t index = 0;
  payment::v1::CreatePaymentRequest request;
  grpc::Status status;     // of the last try
  std::string payment_id;  // empty unless status.ok()
  absl::Duration latency;  // from the first try to the last answer
  int retries = 0;         // extra tries
};

class CreateLoad {
 public:
  // Called on the creating thread after each payment.
  using Observer = std::function<void(const Created&)>;

  // Starts one thread per stub at once.
  CreateLoad(std::vector<std::unique_ptr<payment::v1::PaymentService::StubInterface>> stubs,
             LoadPlan plan, Observer on_created = nullptr);
  ~CreateLoad() { Join(); }
  CreateLoad(const CreateLoad&) = delete;
  CreateLoad& operator=(const CreateLoad&) = delete;

  void Join();
  bool done() const { return finished_threads_.load() == threads_.size(); }
  int64_t created() const { return created_.load(); }
  int64_t failed() const { return failed_.load(); }  // payments given up on
  int64_t retries() const { return retries_.load(); }
  // Every payment tried so far, in index order.
  std::vector<Created> Results() const;

 private:
  void Run(payment::v1::PaymentService::StubInterface& stub);

  const std::vector<std::unique_ptr<payment::v1::PaymentService::StubInterface>> stubs_;
  const LoadPlan plan_;
  const Observer on_created_;
  std::atomic<int64_t> next_{0};
  std::atomic<int64_t> created_{0};
  std::atomic<int64_t> failed_{0};
  std::atomic<int64_t> retries_{0};
  std::atomic<size_t> finished_threads_{0};
  mutable Mutex mu_;
  std::vector<Created> results_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

}  // namespace outbox::client
