#include <gtest/gtest.h>

#include "shared/observability/alerts.h"
#include "shared/observability/metrics.h"
#include "shared/observability/metrics_server.h"

namespace outbox {
namespace {

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

TEST(MetricsTest, OneHelpPerFamilyAndSeriesInRegistrationOrder) {
  MetricsRegistry m;
  Counter& ok = m.AddCounter("x_total", "things", "result=\"ok\"");
  Counter& bad = m.AddCounter("x_total", "ignored second help", "result=\"bad\"");
  m.AddGauge("up", "is it up", "", [] { return 1.0; });
  ok.Add(3);
  bad.Add();
  EXPECT_EQ(m.Render(),
            "# HELP x_total things\n# TYPE x_total counter\n"
            "x_total{result=\"ok\"} 3\nx_total{result=\"bad\"} 1\n"
            "# HELP up is it up\n# TYPE up gauge\nup 1\n");
}

TEST(MetricsServerTest, APortInUseIsAFailedPreconditionNamingIt) {
  auto first = MetricsServer::Start("127.0.0.1:0", [] { return std::string(); });
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string taken = absl::StrCat("127.0.0.1:", (*first)->port());
  auto second = MetricsServer::Start(taken, [] { return std::string(); });
  EXPECT_TRUE(absl::IsFailedPrecondition(second.status())) << second.status();
  EXPECT_EQ(second.status().message(),
            absl::StrCat("cannot listen on ", taken,
                         " for /metrics: address already in use (another process holds it)"));
}

}  // namespace
}  // namespace outbox
