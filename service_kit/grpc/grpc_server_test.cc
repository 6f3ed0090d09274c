#include "service_kit/grpc/grpc_server.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

// gRPC's default SO_REUSEPORT let a second server bind a port in use, and
// the kernel then split the clients between the two.
TEST(GrpcServerTest, APortInUseIsRefusedNotShared) {
  int port = 0;
  auto first = StartGrpcServer("127.0.0.1:0", {}, &port);
  ASSERT_OK(first);
  ASSERT_NE(port, 0);

  const std::string taken = absl::StrCat("127.0.0.1:", port);
  int second_port = 0;
  auto second = StartGrpcServer(taken, {}, &second_port);
  EXPECT_TRUE(absl::IsFailedPrecondition(second.status())) << second.status();
  EXPECT_EQ(second.status().message(),
            absl::StrCat("cannot listen on ", taken,
                         ": address already in use (another process holds it)"));
  EXPECT_EQ(second_port, 0);
  ShutdownGrpcServer(**first);
}

TEST(GrpcServerTest, ARequestAboveTheLimitIsResourceExhausted) {
  int port = 0;
  auto server = StartGrpcServer("127.0.0.1:0", {}, &port);
  ASSERT_OK(server);
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()));
  auto check = [&](size_t bytes) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
    grpc::health::v1::HealthCheckRequest req;
    req.set_service(std::string(bytes, 'x'));
    grpc::health::v1::HealthCheckResponse resp;
    return stub->Check(&ctx, req, &resp).error_code();
  };
  EXPECT_EQ(check(kMaxReceiveMessageBytes + 1), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(check(100), grpc::StatusCode::NOT_FOUND);  // an unknown service, but parsed
  ShutdownGrpcServer(**server);
}

}  // namespace
}  // namespace outbox
