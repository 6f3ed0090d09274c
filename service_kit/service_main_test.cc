#include "service_kit/service_main.h"

#include <gtest/gtest.h>

#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

TEST(ServiceMainTest, ListenAddressIsHostColonPort) {
  EXPECT_OK(ValidateListenAddress("127.0.0.1:0", "x_listen"));
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateListenAddress("50051", "x_listen")));
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateListenAddress("h:70000", "x_listen")));
}

}  // namespace
}  // namespace outbox
