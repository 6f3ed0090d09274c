#include <gtest/gtest.h>

#include "shared/amqp/amqp_client.h"

namespace outbox {
namespace {

TEST(AmqpUrlTest, ParsesTheAmqpUriSpec) {
  auto u = AmqpUrl::Parse("amqp://user:p%40ss@127.0.0.1:5673/%2F");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->user, "user");
  EXPECT_EQ(u->password, "p@ss");
  EXPECT_EQ(u->port, 5673);
  EXPECT_EQ(u->vhost, "/");
  EXPECT_EQ(u->Redacted().find("p@ss"), std::string::npos);
  auto v = AmqpUrl::Parse("amqp://u:p@host/orders");
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(v->vhost, "orders");
  EXPECT_EQ(v->port, 5672);
  EXPECT_TRUE(absl::IsInvalidArgument(AmqpUrl::Parse("http://x").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(AmqpUrl::Parse("amqps://u:p@h/").status()));
}

// Found by fuzz/amqp_url_fuzz.cc: rabbitmq-c takes these (it stops at the NUL).
TEST(AmqpUrlTest, RefusesWhatCannotBeConnectedTo) {
  EXPECT_TRUE(absl::IsInvalidArgument(AmqpUrl::Parse("amqp://h:0/").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      AmqpUrl::Parse(std::string("amqp://h:5672/\0amqp://other/", 28)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(AmqpUrl::Parse("amqp://h\n:5672/").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(AmqpUrl::Parse("amqp://h:5672/a%0Ab").status()));
}

}  // namespace
}  // namespace outbox
