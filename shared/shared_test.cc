#include <gtest/gtest.h>

#include "shared/alerts.h"
#include "shared/amqp_client.h"
#include "shared/backoff.h"
#include "shared/grpc_util.h"
#include "shared/ids.h"
#include "shared/sqlite_util.h"

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

TEST(LinearBackoffTest, GrowsLinearlyUpToTheCap) {
  LinearBackoff b{absl::Milliseconds(500), absl::Seconds(2)};
  EXPECT_EQ(b.After(0), absl::Milliseconds(500));
  EXPECT_EQ(b.After(1), absl::Milliseconds(500));
  EXPECT_EQ(b.After(2), absl::Seconds(1));
  EXPECT_EQ(b.After(3), absl::Milliseconds(1500));
  EXPECT_EQ(b.After(4), absl::Seconds(2));
  EXPECT_EQ(b.After(40), absl::Seconds(2));
}

TEST(IdsTest, UuidsAreVersion4AndDistinct) {
  UuidGenerator g;
  std::string a = g.NewId(), b = g.NewId();
  EXPECT_NE(a, b);
  ASSERT_EQ(a.size(), 36u);
  EXPECT_EQ(a[14], '4');
  SequentialIds s("x");
  EXPECT_EQ(s.NewId(), "x1");
  EXPECT_EQ(s.NewId(), "x2");
}

TEST(PagingTest, DefaultsCapsAndRejectsForeignTokens) {
  EXPECT_EQ(ParsePageRequest(0, "")->limit, 100);
  EXPECT_EQ(ParsePageRequest(5000, "")->limit, 1000);
  EXPECT_EQ(ParsePageRequest(10, "42")->after_id, 42);
  EXPECT_TRUE(absl::IsInvalidArgument(ParsePageRequest(-1, "").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParsePageRequest(10, "abc").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParsePageRequest(10, "-3").status()));
  EXPECT_EQ(NextPageToken(0), "");
  EXPECT_EQ(NextPageToken(7), "7");
}

TEST(SqliteUtilTest, ParsesDurability) {
  EXPECT_EQ(*ParseDurability("full"), Durability::kFull);
  EXPECT_EQ(*ParseDurability("NORMAL"), Durability::kNormal);
  EXPECT_TRUE(absl::IsInvalidArgument(ParseDurability("fast").status()));
}

TEST(AlertsTest, AlertmanagerJsonCarriesLabelsAnnotationsAndEscapes) {
  Alert a;
  a.name = "OutboxMessageFailed";
  a.labels = {{"message_id", "m-1"}};
  a.annotations = {{"summary", "say \"hi\"\n"}};
  a.starts_at = absl::FromUnixSeconds(0);
  const std::string json = AlertmanagerJson({a}, "recovery_service");
  EXPECT_EQ(json,
            "[{\"labels\":{\"alertname\":\"OutboxMessageFailed\",\"message_id\":\"m-1\","
            "\"service\":\"recovery_service\",\"severity\":\"critical\"},"
            "\"annotations\":{\"summary\":\"say \\\"hi\\\"\\n\"},"
            "\"startsAt\":\"1970-01-01T00:00:00.000Z\"}]");
}

}  // namespace
}  // namespace outbox
