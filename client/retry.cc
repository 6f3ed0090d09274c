#include "client/retry.h"

#include <algorithm>

#include "absl/time/clock.h"
#include "client/channel.h"

namespace outbox::client {

ErrorClass Classify(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED: return ErrorClass::kTransient;
    case grpc::StatusCode::OK:
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::UNIMPLEMENTED: return ErrorClass::kPermanent;
    default: return ErrorClass::kUnknown;
  }
}

bool ShouldRetry(const RetryPolicy& policy, grpc::StatusCode code, int attempt,
                 absl::Duration elapsed) {
  if (policy.max_attempts > 0 && attempt >= policy.max_attempts) return false;
  if (elapsed > policy.retry_for) return false;
  switch (Classify(code)) {
    case ErrorClass::kTransient: return true;
    case ErrorClass::kPermanent: return false;
    case ErrorClass::kUnknown: return policy.retry_unknown;
  }
  return false;
}

absl::Duration Backoff(const RetryPolicy& policy, int attempt) {
  absl::Duration pause = policy.first_backoff;
  for (int i = 1; i < attempt && pause < policy.max_backoff; ++i) pause *= 2;
  return std::min(pause, policy.max_backoff);
}

grpc::Status CreateWithRetries(payment::v1::PaymentService::StubInterface& stub,
                               const payment::v1::CreatePaymentRequest& request,
                               const RetryPolicy& policy,
                               payment::v1::CreatePaymentResponse* response, int* retries) {
  const absl::Time first = absl::Now();
  for (int attempt = 1;; ++attempt) {
    grpc::ClientContext ctx;
    SetTimeout(&ctx, policy.call_timeout);
    grpc::Status status = stub.CreatePayment(&ctx, request, response);
    if (status.ok() || !ShouldRetry(policy, status.error_code(), attempt, absl::Now() - first)) {
      return status;
    }
    if (retries != nullptr) ++*retries;
    absl::SleepFor(Backoff(policy, attempt));
  }
}

}  // namespace outbox::client
