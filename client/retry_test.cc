#include "client/retry.h"

#include <gtest/gtest.h>

namespace outbox::client {
namespace {

using grpc::StatusCode;

TEST(ClassifyTest, EveryCode) {
  for (StatusCode c : {StatusCode::UNAVAILABLE, StatusCode::DEADLINE_EXCEEDED}) {
    EXPECT_EQ(Classify(c), ErrorClass::kTransient) << c;
  }
  for (StatusCode c :
       {StatusCode::OK, StatusCode::INVALID_ARGUMENT, StatusCode::ALREADY_EXISTS,
        StatusCode::FAILED_PRECONDITION, StatusCode::NOT_FOUND, StatusCode::OUT_OF_RANGE,
        StatusCode::PERMISSION_DENIED, StatusCode::UNAUTHENTICATED, StatusCode::UNIMPLEMENTED}) {
    EXPECT_EQ(Classify(c), ErrorClass::kPermanent) << c;
  }
  for (StatusCode c : {StatusCode::CANCELLED, StatusCode::UNKNOWN, StatusCode::RESOURCE_EXHAUSTED,
                       StatusCode::ABORTED, StatusCode::INTERNAL, StatusCode::DATA_LOSS}) {
    EXPECT_EQ(Classify(c), ErrorClass::kUnknown) << c;
  }
}

TEST(ShouldRetryTest, BoundedByAttempts) {
  RetryPolicy p;
  p.max_attempts = 5;
  for (int attempt = 1; attempt < 5; ++attempt) {
    EXPECT_TRUE(ShouldRetry(p, StatusCode::UNAVAILABLE, attempt, absl::Hours(1)));
    EXPECT_TRUE(ShouldRetry(p, StatusCode::DEADLINE_EXCEEDED, attempt, absl::ZeroDuration()));
    EXPECT_FALSE(ShouldRetry(p, StatusCode::INTERNAL, attempt, absl::ZeroDuration()));
    EXPECT_FALSE(ShouldRetry(p, StatusCode::INVALID_ARGUMENT, attempt, absl::ZeroDuration()));
  }
  EXPECT_FALSE(ShouldRetry(p, StatusCode::UNAVAILABLE, 5, absl::ZeroDuration()));
}

TEST(ShouldRetryTest, BoundedByTime) {
  RetryPolicy p;
  p.max_attempts = 0;
  p.retry_for = absl::Seconds(60);
  p.retry_unknown = true;
  EXPECT_TRUE(ShouldRetry(p, StatusCode::UNAVAILABLE, 1000, absl::Seconds(60)));
  EXPECT_TRUE(ShouldRetry(p, StatusCode::INTERNAL, 3, absl::Seconds(1)));
  EXPECT_TRUE(ShouldRetry(p, StatusCode::UNKNOWN, 3, absl::Seconds(1)));
  EXPECT_FALSE(ShouldRetry(p, StatusCode::UNAVAILABLE, 2, absl::Seconds(61)));
  EXPECT_FALSE(ShouldRetry(p, StatusCode::ALREADY_EXISTS, 1, absl::ZeroDuration()));
  EXPECT_FALSE(ShouldRetry(p, StatusCode::FAILED_PRECONDITION, 1, absl::ZeroDuration()));
}

TEST(BackoffTest, DoublesUpToTheCap) {
  RetryPolicy p;
  p.first_backoff = absl::Milliseconds(50);
  p.max_backoff = absl::Seconds(1);
  EXPECT_EQ(Backoff(p, 1), absl::Milliseconds(50));
  EXPECT_EQ(Backoff(p, 2), absl::Milliseconds(100));
  EXPECT_EQ(Backoff(p, 5), absl::Milliseconds(800));
  EXPECT_EQ(Backoff(p, 6), absl::Seconds(1));
  EXPECT_EQ(Backoff(p, 1000000), absl::Seconds(1));
}

TEST(BackoffTest, FixedWhenFirstIsTheCap) {
  RetryPolicy p;
  p.first_backoff = p.max_backoff = absl::Milliseconds(100);
  EXPECT_EQ(Backoff(p, 1), absl::Milliseconds(100));
  EXPECT_EQ(Backoff(p, 40), absl::Milliseconds(100));
}

}  // namespace
}  // namespace outbox::client
