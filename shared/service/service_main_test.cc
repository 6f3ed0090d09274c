#include "shared/service/service_main.h"

#include <gtest/gtest.h>

namespace outbox {
namespace {

// 2 tells a supervisor (and a person) that starting again unchanged will not
// help: fix the setting, free the port, point at the right database.
TEST(ServiceMainTest, ExitsTwoWhenItCannotStartAsConfigured) {
  EXPECT_EQ(ExitCodeFor(absl::OkStatus()), 0);
  EXPECT_EQ(ExitCodeFor(absl::InvalidArgumentError("--amqp_url is required")), 2);
  EXPECT_EQ(ExitCodeFor(absl::FailedPreconditionError("cannot listen on 127.0.0.1:1")), 2);
  EXPECT_EQ(ExitCodeFor(absl::UnavailableError("database is locked")), 1);
  EXPECT_EQ(ExitCodeFor(absl::InternalError("disk I/O error")), 1);
}

TEST(ServiceMainTest, ListenAddressIsHostColonPort) {
  EXPECT_TRUE(ValidateListenAddress("127.0.0.1:0", "x_listen").ok());
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateListenAddress("50051", "x_listen")));
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateListenAddress("h:70000", "x_listen")));
}

}  // namespace
}  // namespace outbox
