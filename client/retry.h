#pragma once

// CreatePayment with retries. Retrying is safe because the idempotency key
// makes a second try of the same request return the first one's payment.
#include <grpcpp/grpcpp.h>

#include "absl/time/time.h"
#include "payment/v1/payment.grpc.pb.h"

namespace outbox::client {

// What another try of the same request can change.
enum class ErrorClass {
  kTransient,  // UNAVAILABLE, DEADLINE_EXCEEDED: the service was down or slow
  kPermanent,  // the request itself is refused (or OK: nothing to try again)
  kUnknown,    // the rest (INTERNAL, UNKNOWN, ABORTED, ...): it may pass next time
};
ErrorClass Classify(grpc::StatusCode code);

struct RetryPolicy {
  int max_attempts = 1;                                 // tries in all; 0: no limit
  absl::Duration retry_for = absl::InfiniteDuration();  // no retry once this long has passed
  bool retry_unknown = false;  // kTransient is always retried, kPermanent never
  absl::Duration first_backoff = absl::Milliseconds(100);  // doubled after each retry,
  absl::Duration max_backoff = absl::Seconds(1);           // up to this
  absl::Duration call_timeout = absl::Seconds(10);         // each try
};

// Whether try number `attempt` (from 1), failed with `code` `elapsed` after
// the first try began, is followed by another.
bool ShouldRetry(const RetryPolicy& policy, grpc::StatusCode code, int attempt,
                 absl::Duration elapsed);

// The pause after failed try number `attempt` (from 1).
absl::Duration Backoff(const RetryPolicy& policy, int attempt);

// Calls CreatePayment until it succeeds or `policy` gives up; the last
// status. `*retries` (if given) is increased by the extra tries.
grpc::Status CreateWithRetries(payment::v1::PaymentService::StubInterface& stub,
                               const payment::v1::CreatePaymentRequest& request,
                               const RetryPolicy& policy,
                               payment::v1::CreatePaymentResponse* response,
                               int* retries = nullptr);

}  // namespace outbox::client
