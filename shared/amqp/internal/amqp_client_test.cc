// The broker's reply codes (AMQP 0-9-1 constants, as on the wire) as status
// codes; the real broker's refusals are in tests/amqp_client_integration_test.
#include "shared/amqp/internal/amqp_client.h"

#include <gtest/gtest.h>

namespace outbox {
namespace {

TEST(StatusCodeOfAmqpReplyTest, EachReplyCodeHasItsStatusCode) {
  using C = absl::StatusCode;
  const std::pair<int, C> cases[] = {
      {404, C::kNotFound},         {312, C::kNotFound},           {403, C::kPermissionDenied},
      {530, C::kPermissionDenied}, {406, C::kFailedPrecondition}, {405, C::kFailedPrecondition},
      {311, C::kInvalidArgument},  {506, C::kResourceExhausted},  {540, C::kUnimplemented},
      {501, C::kInternal},         {502, C::kInternal},           {503, C::kInternal},
      {504, C::kInternal},         {505, C::kInternal},           {541, C::kInternal},
      {320, C::kUnavailable},      {313, C::kUnavailable},        {0, C::kUnavailable},
  };
  for (const auto& [reply, code] : cases) {
    EXPECT_EQ(StatusCodeOfAmqpReply(reply), code) << reply;
  }
}

}  // namespace
}  // namespace outbox
