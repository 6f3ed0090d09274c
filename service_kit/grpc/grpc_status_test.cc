#include "service_kit/grpc/grpc_status.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace outbox {
namespace {

// Storage errors reach clients with their own code: a full disk is
// RESOURCE_EXHAUSTED (retry later), never a generic INTERNAL.
TEST(GrpcStatusTest, MapsStorageErrorsToTheirCodes) {
  EXPECT_EQ(ToGrpcStatus(absl::ResourceExhaustedError("disk full")).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(ToGrpcStatus(absl::FailedPreconditionError("not a db")).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(ToGrpcStatus(absl::DataLossError("corrupt")).error_code(), grpc::StatusCode::DATA_LOSS);
  EXPECT_EQ(ToGrpcStatus(absl::UnavailableError("busy")).error_code(),
            grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(ToGrpcStatus(absl::ResourceExhaustedError("disk full")).error_message(), "disk full");
  EXPECT_EQ(ToGrpcStatus(absl::OkStatus()).error_code(), grpc::StatusCode::OK);
}

// Every code converts to the one of the same name, both ways, with its message.
TEST(GrpcStatusTest, EachCodeConvertsToItsNamesakeBothWays) {
  const std::vector<std::pair<absl::StatusCode, grpc::StatusCode>> codes = {
      {absl::StatusCode::kCancelled, grpc::StatusCode::CANCELLED},
      {absl::StatusCode::kUnknown, grpc::StatusCode::UNKNOWN},
      {absl::StatusCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT},
      {absl::StatusCode::kDeadlineExceeded, grpc::StatusCode::DEADLINE_EXCEEDED},
      {absl::StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND},
      {absl::StatusCode::kAlreadyExists, grpc::StatusCode::ALREADY_EXISTS},
      {absl::StatusCode::kPermissionDenied, grpc::StatusCode::PERMISSION_DENIED},
      {absl::StatusCode::kResourceExhausted, grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::StatusCode::kFailedPrecondition, grpc::StatusCode::FAILED_PRECONDITION},
      {absl::StatusCode::kAborted, grpc::StatusCode::ABORTED},
      {absl::StatusCode::kOutOfRange, grpc::StatusCode::OUT_OF_RANGE},
      {absl::StatusCode::kUnimplemented, grpc::StatusCode::UNIMPLEMENTED},
      {absl::StatusCode::kInternal, grpc::StatusCode::INTERNAL},
      {absl::StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE},
      {absl::StatusCode::kDataLoss, grpc::StatusCode::DATA_LOSS},
      {absl::StatusCode::kUnauthenticated, grpc::StatusCode::UNAUTHENTICATED},
  };
  for (const auto& [absl_code, grpc_code] : codes) {
    const grpc::Status to = ToGrpcStatus(absl::Status(absl_code, "why"));
    EXPECT_EQ(to.error_code(), grpc_code) << absl::StatusCodeToString(absl_code);
    EXPECT_EQ(to.error_message(), "why");
    EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc_code, "why")), absl::Status(absl_code, "why"));
    EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc_code, "why"), "GetStats"),
              absl::Status(absl_code, "GetStats: why"));
  }
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_EQ(FromGrpcStatus(grpc::Status::OK), absl::OkStatus());
  EXPECT_EQ(FromGrpcStatus(grpc::Status::OK, "GetStats"), absl::OkStatus());
}

}  // namespace
}  // namespace outbox
