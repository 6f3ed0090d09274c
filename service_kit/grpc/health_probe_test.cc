#include "service_kit/grpc/health_probe.h"

#include <gtest/gtest.h>

#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "service_kit/grpc/grpc_server.h"
#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

using ::outbox::testing::StatusIs;

TEST(HealthProbeTest, ServingServerIsHealthyNotServingOrGoneIsNot) {
  int port = 0;
  auto server = StartGrpcServer("127.0.0.1:0", {}, &port);
  ASSERT_OK(server);
  const std::string addr = absl::StrCat("127.0.0.1:", port);
  EXPECT_OK(ProbeHealth(addr, absl::Seconds(2)));

  (*server)->GetHealthCheckService()->SetServingStatus(false);
  absl::Status not_serving = ProbeHealth(addr, absl::Seconds(2));
  EXPECT_EQ(not_serving.code(), absl::StatusCode::kFailedPrecondition) << not_serving;
  EXPECT_NE(not_serving.message().find("NOT_SERVING"), std::string::npos) << not_serving;

  ShutdownGrpcServer(**server);
  (*server)->Wait();
  absl::Status gone = ProbeHealth(addr, absl::Seconds(2));
  // Nothing answers on the port: the call's own error, not FAILED_PRECONDITION.
  EXPECT_THAT(gone, StatusIs(absl::StatusCode::kUnavailable));
}

TEST(HealthProbeTest, AddressMustBeHostPort) {
  EXPECT_EQ(ProbeHealth("localhost", absl::Seconds(1)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ProbeHealth(":50051", absl::Seconds(1)).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace outbox
