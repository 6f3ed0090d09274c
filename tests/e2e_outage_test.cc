// Incidents heal without an operator. Accounting stops while payments keep
// coming: recovery sees nobody consuming PAY_QUEUE, re-publishes nothing,
// spends no attempt, raises one alert; accounting returns, every row turns
// SENT with one voucher and the alert resolves at a real Alertmanager.
// Also: a consumer present that loses messages still gets them re-published,
// and a long idle spell costs recovery no connection and no attempt.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "shared/amqp/internal/amqp_client.h"
#include "shared/testing/status_matchers.h"
#include "tests/support/alertmanager.h"
#include "tests/support/load.h"
#include "tests/support/queue_sink.h"
#include "tests/support/services.h"

namespace outbox::testing {
namespace {

// An operator's tight settings: short retry delays and a small attempt
// budget, so an outage would spend attempts fast if recovery did not hold.
const Env kOutageEnv = {{"RECOVERY_BASE_DELAY", "1s"},
                        {"RECOVERY_MAX_DELAY", "10s"},
                        {"RECOVERY_MAX_ATTEMPTS", "3"},
                        {"RECOVERY_IDLE_SLEEP", "200ms"},
                        {"RECOVERY_HOUSEKEEPING_EVERY", "1s"}};

int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

std::unique_ptr<AmqpConnection> Connect(const ServiceSet& s) {
  auto url = AmqpUrl::Parse(s.broker().amqp_url);
  auto c = AmqpConnection::Connect(*url, "test-observer");
  EXPECT_OK(c);
  return std::move(c).value();
}

TEST(OutageTest, AnAccountingOutageHealsWithoutAnOperator) {
  constexpr int kPayments = 100;
  ServiceSet services(kOutageEnv);
  Alertmanager alertmanager(services.dir());
  services.StartAll();
  auto& recovery = services.StartRecovery("r", {{"ALERTMANAGER_URL", alertmanager.url()}});
  CreatePayments(services, "warm-", 5);
  ASSERT_EQ(WaitAllSent(services, 5, absl::Seconds(20)), 5);

  // Accounting stops for 15 s while 100 payments are created.
  ASSERT_EQ(services.accounting().Terminate(), 0);
  const absl::Time outage_start = absl::Now();
  CreatePayments(services, "outage-", kPayments);
  auto observer = Connect(services);
  int64_t max_depth = 0;
  ::ops::v1::Stats during;
  while (absl::Now() - outage_start < absl::Seconds(15)) {
    auto depth = observer->MessageCount(services.pay_queue());
    ASSERT_OK(depth);
    max_depth = std::max<int64_t>(max_depth, *depth);
    during = OpsStats(recovery);
    absl::SleepFor(absl::Milliseconds(250));
  }
  std::cout << "during the outage: PAY_QUEUE held at most " << max_depth << " messages for "
            << kPayments << " payments (" << static_cast<double>(max_depth) / kPayments
            << " per payment); FAILED " << during.failed() << "; hold '" << during.delivery_hold()
            << "'; deferred " << during.deferred_total() << "\n";
  EXPECT_LE(max_depth, kPayments * 11 / 10);
  EXPECT_EQ(during.failed(), 0);
  EXPECT_EQ(during.delivery_hold(), "consumer_down");
  EXPECT_EQ(during.pay_queue_consumers(), 0);
  EXPECT_EQ(during.republished_total(), 0);
  EXPECT_EQ(during.deferred_total(), 0);  // held rows are left as they are, not rewritten
  std::string alerts;
  ASSERT_TRUE(PollUntil(
      [&] {
        alerts = alertmanager.Alerts();
        return alerts.find("OutboxConsumerDown") != std::string::npos;
      },
      absl::Seconds(30), absl::Milliseconds(200)))
      << alerts;

  // Accounting returns: everything is delivered (how fast is printed: a
  // figure of the machine, not asserted), nothing is left alerting.
  services.StartAccounting();
  const absl::Time back = absl::Now();
  ASSERT_EQ(WaitAllSent(services, kPayments + 5, absl::Seconds(60)), kPayments + 5);
  std::cout << "every row SENT " << absl::FormatDuration(absl::Now() - back)
            << " after accounting returned\n";
  auto vouchers = services.AllVouchers();
  std::set<std::string> booked;
  for (const auto& v : vouchers) EXPECT_TRUE(booked.insert(v.payment_id()).second);
  EXPECT_EQ(vouchers.size(), static_cast<size_t>(kPayments + 5));
  ASSERT_TRUE(PollUntil(
      [&] {
        alerts = alertmanager.Alerts();
        return alerts.find("OutboxConsumerDown") == std::string::npos;
      },
      absl::Seconds(30), absl::Milliseconds(200)))
      << alerts;
  const std::string log = recovery.process.Log();
  const int raised = Count(log, " alert alertname=");
  std::cout << "alerts raised: " << raised << ", resolved: " << Count(log, "alert_resolved")
            << "\n";
  EXPECT_LE(raised, 2) << log;
  EXPECT_EQ(Count(log, "alertname=OutboxMessageFailed"), 0);
  auto after = OpsStats(recovery);
  EXPECT_EQ(after.failed(), 0);
  EXPECT_EQ(after.alerts_active(), 0);
  EXPECT_EQ(after.delivery_hold(), "");
  for (const auto& p : services.AllPayments())
    EXPECT_EQ(p.outbox().attempts(), 1) << p.payment_id();
  const CheckResult check = RunChecker(services);
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

TEST(OutageTest, AfterALongIdleSpellLostMessagesAreRepublishedAtNoExtraCost) {
  constexpr int kPayments = 20;
  ServiceSet services(kOutageEnv);
  services.StartPayment();
  auto& recovery = services.StartRecovery("r");
  // 60 s with nothing to do: far past the broker's heartbeat timeout for a
  // connection that never speaks (two heartbeats, 2 x kAmqpHeartbeat).
  absl::SleepFor(absl::Seconds(60));
  {
    // A consumer takes the messages and loses them: the queue is consumed
    // and short, so recovery re-publishes as it should.
    QueueSink sink(services.broker().amqp_url, services.pay_queue(), QueueSink::Mode::kDrop);
    CreatePayments(services, "lost-", kPayments);
    ASSERT_TRUE(PollUntil([&] { return OpsStats(recovery).republished_total() >= kPayments; },
                          absl::Seconds(20)));
  }
  auto stats = OpsStats(recovery);
  EXPECT_EQ(stats.publish_failures_total(), 0);
  const std::string log = recovery.process.Log();
  EXPECT_EQ(log.find("amqp_connection_lost"), std::string::npos) << log;
  EXPECT_EQ(log.find("republish_failed"), std::string::npos) << log;
  services.StartAccounting();
  ASSERT_EQ(WaitAllSent(services, kPayments, absl::Seconds(30)), kPayments);
  for (const auto& p : services.AllPayments()) EXPECT_EQ(p.outbox().last_error(), "");
  EXPECT_EQ(services.AllVouchers().size(), static_cast<size_t>(kPayments));
}

}  // namespace
}  // namespace outbox::testing
