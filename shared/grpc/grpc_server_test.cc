#include "shared/grpc/grpc_server.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace outbox {
namespace {

// gRPC's default SO_REUSEPORT let a second server bind a port in use, and
// the kernel then split the clients between the two.
TEST(GrpcServerTest, APortInUseIsRefusedNotShared) {
  int port = 0;
  auto first = StartGrpcServer("127.0.0.1:0", {}, &port);
  ASSERT_TRUE(first.ok()) << first.status();
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

}  // namespace
}  // namespace outbox
