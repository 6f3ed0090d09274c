#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "shared/observability/internal/alert_group.h"
#include "shared/observability/internal/alerts.h"
#include "shared/observability/internal/http_client.h"
#include "shared/observability/internal/trace.h"
#include "shared/observability/log.h"
#include "shared/observability/metrics.h"
#include "shared/observability/metrics_server.h"
#include "shared/testing/fakes.h"
#include "shared/testing/manual_clock.h"
#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

TEST(LogSinkTest, AnAdoptersSinkGetsEachEventWithItsPartsAndStderrGetsNothing) {
  struct Seen {
    LogLevel level;
    std::string event, fields, line;
  };
  std::vector<Seen> seen;
  SetLogSink([&](const LogRecord& r) {
    std::string fields;
    for (const auto& [key, value] : r.fields) absl::StrAppend(&fields, key, "=", value, ";");
    seen.push_back({r.level, std::string(r.event), fields, std::string(r.line)});
  });
  ::testing::internal::CaptureStderr();
  LogWarning("batch_held", {KV("queue", "stamps"), KV("messages", 3)});
  LogDebug("below_the_level");  // dropped before the sink, as before stderr
  SetLogSink(nullptr);
  LogInfo("back_to_stderr");
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].level, LogLevel::kWarning);
  EXPECT_EQ(seen[0].event, "batch_held");
  EXPECT_EQ(seen[0].fields, "queue=stamps;messages=3;");
  EXPECT_NE(seen[0].line.find(" warning batch_held queue=stamps messages=3\n"), std::string::npos)
      << seen[0].line;
  EXPECT_EQ(err.find("batch_held"), std::string::npos) << err;
  EXPECT_NE(err.find("back_to_stderr"), std::string::npos) << err;
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
            "\"annotations\":{\"runbook_url\":\"docs/operations.md#outboxmessagefailed\","
            "\"summary\":\"say \\\"hi\\\"\\n\"},"
            "\"startsAt\":\"1970-01-01T00:00:00.000Z\"}]");
}

TEST(AlertsTest, EveryAlertPointsAtItsRunbookUnlessItNamesOne) {
  Alert a;
  a.name = "OutboxConsumerDown";
  EXPECT_NE(AlertmanagerJson({a}, "recovery_service", "https://ops.example/runbooks.html")
                .find("\"runbook_url\":\"https://ops.example/runbooks.html#outboxconsumerdown\""),
            std::string::npos);
  a.annotations["runbook_url"] = "https://elsewhere/x";
  EXPECT_NE(
      AlertmanagerJson({a}, "recovery_service").find("\"runbook_url\":\"https://elsewhere/x\""),
      std::string::npos);
}

TEST(HttpClientTest, GetsAndPostsAndReportsTransportErrorsAsUnavailable) {
  MetricsRegistry metrics;
  metrics.AddCounter("x_total", "things").Add();
  auto server = MetricsServer::Start("127.0.0.1:0", metrics);
  ASSERT_OK(server);
  const std::string base = absl::StrCat("http://127.0.0.1:", (*server)->port());
  auto got = HttpGet(base + "/metrics", absl::Seconds(5));
  ASSERT_OK(got);
  EXPECT_EQ(got->status, 200);
  EXPECT_NE(got->body.find("\nx_total 1\n"), std::string::npos) << got->body;
  auto posted = HttpPost(base + "/metrics", "application/json", "{}", absl::Seconds(5));
  ASSERT_OK(posted);
  EXPECT_EQ(posted->status, 405);  // an HTTP status is an answer, not an error

  // Nobody listens: UNAVAILABLE naming the URL.
  const int closed = (*server)->port();
  server->reset();
  auto refused = HttpGet(absl::StrCat("http://127.0.0.1:", closed, "/metrics"), absl::Seconds(5));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("/metrics"), std::string::npos) << refused.status();
  EXPECT_EQ(HttpGet("not a url", absl::Seconds(1)).status().code(), absl::StatusCode::kUnavailable);
}

TEST(HttpClientTest, AServerThatNeverAnswersCostsTheTimeoutNotMore) {
  // A listening socket nobody accepts from: the connection is made (by the
  // kernel's backlog) and the request then waits for an answer forever.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 8), 0);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const absl::Time start = absl::Now();
  auto r = HttpGet(absl::StrCat("http://127.0.0.1:", ntohs(addr.sin_port), "/"),
                   absl::Milliseconds(300));
  const absl::Duration took = absl::Now() - start;
  close(fd);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_LT(took, absl::Seconds(3)) << "the timeout bounds the whole request";
}

TEST(TraceTest, ParsesTheW3cFormatAndRejectsTheRest) {
  auto t = ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(t->span_id, "00f067aa0ba902b7");
  EXPECT_EQ(t->Traceparent(), "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  for (const char* bad :
       {"", "garbage", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // all-zero trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  // all-zero span id
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  // upper case
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // forbidden version
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra"}) {
    EXPECT_FALSE(ParseTraceparent(bad).has_value()) << bad;
  }
  // A later version: its first four fields are read.
  EXPECT_TRUE(
      ParseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x").has_value());
}

TEST(TraceTest, ContinuesATraceWithANewSpanOrStartsOne) {
  const std::string parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  TraceContext child = ContinueOrStart(parent);
  EXPECT_EQ(child.trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_NE(child.span_id, "00f067aa0ba902b7");
  EXPECT_TRUE(ParseTraceparent(child.Traceparent()).has_value());
  TraceContext fresh = ContinueOrStart("not a traceparent");
  EXPECT_TRUE(ParseTraceparent(fresh.Traceparent()).has_value());
  EXPECT_NE(fresh.trace_id, NewTrace().trace_id);
  EXPECT_EQ(TraceIdOf(parent), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(TraceIdOf(""), "");
}

TEST(AlertsTest, AResolutionCarriesItsEndTime) {
  Alert a;
  a.name = "OutboxConsumerDown";
  a.starts_at = absl::FromUnixSeconds(0);
  a.ends_at = absl::FromUnixSeconds(61);
  const std::string json = AlertmanagerJson({a}, "recovery_service");
  EXPECT_NE(
      json.find(
          "\"startsAt\":\"1970-01-01T00:00:00.000Z\",\"endsAt\":\"1970-01-01T00:01:01.000Z\""),
      std::string::npos)
      << json;
}

Alert Named(const std::string& name, const std::string& id) {
  Alert a;
  a.name = name;
  a.labels = {{"message_id", id}};
  return a;
}

TEST(AlertGroupTest, RaisesOnceRefreshesWhileActiveResolvesWhenGone) {
  testing::ManualClock clock;
  testing::RecordingAlerts sink;
  AlertGroup group(sink, clock, absl::Seconds(60));
  group.Update({Named("F", "a"), Named("F", "b")});
  ASSERT_EQ(sink.raised.size(), 2u);
  EXPECT_EQ(sink.raised[0].ends_at, clock.Now() + absl::Seconds(240));  // expires if we die
  clock.Advance(absl::Seconds(10));
  group.Update({Named("F", "a"), Named("F", "b")});
  EXPECT_EQ(sink.raised.size(), 2u);  // still the same incident: no second alert
  EXPECT_TRUE(sink.refreshed.empty());
  clock.Advance(absl::Seconds(60));
  group.Update({Named("F", "a"), Named("F", "b")});
  EXPECT_EQ(sink.refreshed.size(), 2u);  // re-sent so Alertmanager keeps it
  group.Update({Named("F", "b")});
  ASSERT_EQ(sink.resolved.size(), 1u);
  EXPECT_EQ(sink.resolved[0].labels.at("message_id"), "a");
  EXPECT_EQ(sink.resolved[0].ends_at, clock.Now());
  EXPECT_EQ(group.active(), 1u);
  group.Update({}, /*complete=*/false);  // a partial view resolves nothing
  EXPECT_EQ(group.active(), 1u);
  group.Clear();
  EXPECT_EQ(sink.resolved.size(), 2u);
  EXPECT_EQ(group.active(), 0u);
  group.Add(Named("F", "a"));  // a new incident is a new alert
  EXPECT_EQ(sink.raised.size(), 3u);
}

TEST(AlertGroupTest, ForgetDropsTheActiveAlertsWithoutResolvingThem) {
  testing::ManualClock clock;
  testing::RecordingAlerts sink;
  AlertGroup group(sink, clock, absl::Seconds(60));
  group.Update({Named("F", "a"), Named("F", "b")});
  EXPECT_EQ(group.Forget(), 2u);  // another instance owns them now
  EXPECT_EQ(group.active(), 0u);
  EXPECT_TRUE(sink.resolved.empty());
  group.Clear();  // nothing left to resolve either
  EXPECT_TRUE(sink.resolved.empty());
  group.Add(Named("F", "a"));  // raised again when it is ours again
  EXPECT_EQ(sink.raised.size(), 3u);
}

TEST(MetricsTest, OneHelpPerFamilyFromItsFirstSeriesAndOneSeriesPerLabelSet) {
  MetricsRegistry m;
  Counter& ok = m.AddCounter("x_total", "things", {{"result", "ok"}});
  Counter& bad = m.AddCounter("x_total", "", {{"result", "bad"}});
  m.AddCounter("x_total", "ignored second help", {{"result", "ok"}}).Add();  // the same series
  m.AddGauge("up", "is it up", {}, [] { return 1.0; });
  ok.Add(3);
  bad.Add();
  EXPECT_EQ(ok.value(), 4);
  const std::string text = m.Render();
  EXPECT_NE(text.find("# HELP x_total things\n# TYPE x_total counter\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("\nx_total{result=\"ok\"} 4\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nx_total{result=\"bad\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# HELP up is it up\n# TYPE up gauge\nup 1\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("ignored"), std::string::npos) << text;
  EXPECT_EQ(text.find("x_total{result=\"ok\"}"), text.rfind("x_total{result=\"ok\"}")) << text;
}

TEST(MetricsTest, LabelValuesAreEscaped) {
  MetricsRegistry m;
  m.AddCounter("x_total", "things", {{"queue", "a\"b\\c\nd"}}).Add();
  m.AddGauge("y", "y", {{"queue", "q\"1"}}, [] { return 2.0; });
  const std::string text = m.Render();
  EXPECT_NE(text.find("x_total{queue=\"a\\\"b\\\\c\\nd\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("y{queue=\"q\\\"1\"} 2\n"), std::string::npos) << text;
}

TEST(MetricsTest, ScrapedSeriesAreReadAtEachRender) {
  MetricsRegistry m;
  double level = 1;
  int64_t drops = 0;
  m.AddGauge("level", "a level", {{"queue", "Q"}}, [&] { return level; });
  m.AddCounterReader("drops_total", "drops", {}, [&] { return static_cast<double>(drops); });
  m.AddGaugeFamily("rows", "rows by status", [&] {
    return std::vector<MetricsRegistry::Sample>{{{{"status", "A"}}, level * 10},
                                                {{{"status", "B"}}, 0}};
  });
  EXPECT_NE(m.Render().find("level{queue=\"Q\"} 1\n"), std::string::npos) << m.Render();
  level = 2.5;
  drops = 7;
  const std::string text = m.Render();
  EXPECT_NE(text.find("# TYPE level gauge\nlevel{queue=\"Q\"} 2.5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE drops_total counter\ndrops_total 7\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# HELP rows rows by status\n# TYPE rows gauge\n"
                      "rows{status=\"A\"} 25\nrows{status=\"B\"} 0\n"),
            std::string::npos)
      << text;
}

TEST(MetricsTest, ADurationHistogramCountsSecondsInItsBuckets) {
  MetricsRegistry m;
  DurationHistogram& h = m.AddDurationHistogram("x_seconds", "how long");
  h.Observe(absl::Milliseconds(250));
  h.Observe(absl::Seconds(3));
  h.Observe(absl::Seconds(-1));  // the wall clock stepped back: 0
  const std::string text = m.Render();
  EXPECT_NE(text.find("# HELP x_seconds how long\n# TYPE x_seconds histogram\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("\nx_seconds_count 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nx_seconds_sum 3.25\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nx_seconds_bucket{le=\"0.001\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nx_seconds_bucket{le=\"0.1\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nx_seconds_bucket{le=\"0.25\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nx_seconds_bucket{le=\"2.5\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nx_seconds_bucket{le=\"5\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nx_seconds_bucket{le=\"60\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nx_seconds_bucket{le=\"+Inf\"} 3\n"), std::string::npos) << text;
}

// Two workers of one kind in one process: a registry each, told apart by
// a constant label, served on one /metrics.
TEST(MetricsServerTest, TwoRegistriesWithConstantLabelsKeepTheirSeriesApart) {
  MetricsRegistry orders(Labels{{"role", "orders"}});
  MetricsRegistry refunds(Labels{{"role", "refunds"}});
  orders.AddCounter("outbox_relay_published_total", "published", {{"result", "ok"}}).Add(3);
  refunds.AddCounter("outbox_relay_published_total", "published", {{"result", "ok"}}).Add(5);
  refunds.AddGauge("outbox_queue_depth", "depth", {}, [] { return 7.0; });
  refunds.AddGaugeFamily("outbox_rows", "rows", [] {
    return std::vector<MetricsRegistry::Sample>{{{{"status", "SENDING"}}, 2.0}};
  });
  auto server = MetricsServer::Start("127.0.0.1:0", {&orders, &refunds});
  ASSERT_OK(server);
  auto got =
      HttpGet(absl::StrCat("http://127.0.0.1:", (*server)->port(), "/metrics"), absl::Seconds(5));
  ASSERT_OK(got);
  for (const char* line : {"outbox_relay_published_total{result=\"ok\",role=\"orders\"} 3\n",
                           "outbox_relay_published_total{result=\"ok\",role=\"refunds\"} 5\n",
                           "outbox_queue_depth{role=\"refunds\"} 7\n",
                           "outbox_rows{role=\"refunds\",status=\"SENDING\"} 2\n"}) {
    EXPECT_NE(got->body.find(line), std::string::npos) << line << got->body;
  }
}

TEST(MetricsServerTest, APortInUseIsAFailedPreconditionNamingIt) {
  MetricsRegistry metrics;
  auto first = MetricsServer::Start("127.0.0.1:0", metrics);
  ASSERT_OK(first);
  const std::string taken = absl::StrCat("127.0.0.1:", (*first)->port());
  auto second = MetricsServer::Start(taken, metrics);
  EXPECT_TRUE(absl::IsFailedPrecondition(second.status())) << second.status();
  EXPECT_EQ(second.status().message(),
            absl::StrCat("cannot listen on ", taken,
                         " for /metrics: address already in use (another process holds it)"));
}

TEST(MetricsServerTest, StoppingDoesNotWaitOutCivetwebsPollSlice) {
  MetricsRegistry metrics;
  auto server = MetricsServer::Start("127.0.0.1:0", metrics);
  ASSERT_OK(server);
  const absl::Time start = absl::Now();
  server->reset();
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));  // up to 2 s unaided
}

TEST(MetricsServerTest, AnAddressThatIsNotHostPortIsInvalid) {
  MetricsRegistry metrics;
  for (const char* bad : {"9464", "127.0.0.1:x", "127.0.0.1:70000", "example.com:9464"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(MetricsServer::Start(bad, metrics).status())) << bad;
  }
}

// Sends `request` to 127.0.0.1:port and returns the whole response.
std::string ResponseTo(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "connect failed";
  }
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string response;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) response.append(buf, n);
  close(fd);
  return response;
}

TEST(MetricsServerTest, OnlyGetMetricsAnswers200) {
  MetricsRegistry metrics;
  auto server = MetricsServer::Start("127.0.0.1:0", metrics);
  ASSERT_OK(server);
  const int port = (*server)->port();
  auto response = [&](const std::string& line) {
    return ResponseTo(port, line + "\r\nHost: x\r\n\r\n");
  };
  auto get = [&](const std::string& line) {
    const std::string r = response(line);
    return r.substr(0, r.find("\r\n"));
  };
  EXPECT_EQ(get("GET /metrics HTTP/1.1"), "HTTP/1.1 200 OK");
  EXPECT_EQ(get("GET /metrics?name[]=up HTTP/1.1"), "HTTP/1.1 200 OK");
  EXPECT_EQ(get("GET /metrics/anything HTTP/1.1"), "HTTP/1.1 404 Not Found");
  EXPECT_EQ(get("GET /metricsx HTTP/1.1"), "HTTP/1.1 404 Not Found");
  EXPECT_EQ(get("GET / HTTP/1.1"), "HTTP/1.1 404 Not Found");
  EXPECT_EQ(get("POST /metrics HTTP/1.1"), "HTTP/1.1 405 Method Not Allowed");
  EXPECT_EQ(get("HEAD /metrics HTTP/1.1"), "HTTP/1.1 405 Method Not Allowed");
  // civetweb answers a request line it cannot parse itself, in HTTP/1.0.
  EXPECT_EQ(get("garbage"), "HTTP/1.0 400 Bad Request");
  EXPECT_NE(response("POST /metrics HTTP/1.1").find("\r\nAllow: GET\r\n"), std::string::npos);
  EXPECT_NE(
      response("GET /metrics HTTP/1.1").find("\r\nContent-Type: text/plain; charset=utf-8\r\n"),
      std::string::npos);
}

TEST(MetricsServerTest, ServesTheRegistryTheScrapedSeriesAndItsOwn) {
  MetricsRegistry metrics;
  metrics.AddCounter("x_total", "things", {{"result", "ok"}}).Add(2);
  int reads = 0;
  metrics.AddGauge("level", "a level", {}, [&reads] { return ++reads; });
  metrics.AddDurationHistogram("x_seconds", "how long").Observe(absl::Milliseconds(3));
  auto server = MetricsServer::Start("localhost:0", metrics);
  ASSERT_OK(server);
  const std::string url = absl::StrCat("http://127.0.0.1:", (*server)->port(), "/metrics");
  auto first = HttpGet(url, absl::Seconds(5));
  auto second = HttpGet(url, absl::Seconds(5));
  ASSERT_OK(first);
  ASSERT_OK(second);
  EXPECT_NE(first->body.find("\nx_total{result=\"ok\"} 2\n"), std::string::npos) << first->body;
  EXPECT_NE(first->body.find("\nx_seconds_bucket{le=\"0.005\"} 1\n"), std::string::npos)
      << first->body;
  EXPECT_NE(first->body.find("\nlevel 1\n"), std::string::npos) << first->body;
  EXPECT_NE(second->body.find("\nlevel 2\n"), std::string::npos) << second->body;
  // prometheus-cpp's exposer adds its own series.
  EXPECT_NE(second->body.find("\n# TYPE exposer_scrapes_total counter\n"), std::string::npos)
      << second->body;
}

}  // namespace
}  // namespace outbox
