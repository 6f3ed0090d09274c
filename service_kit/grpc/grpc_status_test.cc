#include "service_kit/grpc/grpc_status.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace outbox
