// recovery_service on real parts: linear backoff until FAILED while a consumer
// takes the messages but never books them, the alert at a real Alertmanager
// (resolved when the row is closed), operator re-drive, and lease hand-over
// between instances.
#include <gtest/gtest.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "client/channel.h"
#include "google/protobuf/util/time_util.h"
#include "shared/testing/status_matchers.h"
#include "tests/support/alertmanager.h"
#include "tests/support/load.h"
#include "tests/support/queue_sink.h"
#include "tests/support/services.h"

namespace outbox::testing {
namespace {

using google::protobuf::util::TimeUtil;

// The outbox message ids of `n` new payments.
std::vector<std::string> CreateMessages(ServiceSet& s, const std::string& prefix, int n) {
  std::vector<std::string> message_ids;
  for (const auto& p : CreatePayments(s, prefix, n)) message_ids.push_back(p.outbox().message_id());
  return message_ids;
}

int CountSent(ServiceSet& s) {
  int n = 0;
  for (const auto& p : s.AllPayments()) n += p.outbox().status() == ::payment::v1::SENT;
  return n;
}

void ExpectOneVoucherEach(ServiceSet& s, size_t payments) {
  std::set<std::string> seen;
  auto vouchers = s.AllVouchers();
  for (const auto& v : vouchers) EXPECT_TRUE(seen.insert(v.payment_id()).second) << v.payment_id();
  EXPECT_EQ(vouchers.size(), payments);
}

TEST(RecoveryTest, BackoffIsLinearUntilFailedThenAlertedAndRedriven) {
  constexpr int kPayments = 20;
  const Env env = {{"RECOVERY_BASE_DELAY", "400ms"},
                   {"RECOVERY_MAX_DELAY", "10s"},
                   {"RECOVERY_MAX_ATTEMPTS", "4"},
                   {"RECOVERY_IDLE_SLEEP", "100ms"}};
  ServiceSet services(env);
  Alertmanager alertmanager(services.dir());
  services.StartPayment();
  // Not accounting: a consumer that dead-letters every message. The queue is
  // consumed, so recovery re-publishes and spends the budget, as it should.
  auto sink = std::make_unique<QueueSink>(services.broker().amqp_url, services.pay_queue(),
                                          QueueSink::Mode::kDeadLetter);
  auto& recovery = services.StartRecovery(
      "r1", {{"ALERTMANAGER_URL", alertmanager.url()}, {"RECOVERY_HOUSEKEEPING_EVERY", "500ms"}});
  const std::vector<std::string> ids = CreateMessages(services, "lin-", kPayments);

  // Watch one row: every attempt n sets next_retry_at = last_attempt_at + 400ms * n.
  std::map<int, ::ops::v1::OutboxMessage> by_attempt;
  ::ops::v1::OutboxMessage row;
  ASSERT_TRUE(PollUntil(
      [&] {
        grpc::ClientContext ctx;
        ::ops::v1::GetMessageRequest req;
        req.set_message_id(ids[0]);
        if (!recovery.ops->GetMessage(&ctx, req, &row).ok()) return false;
        if (row.status() == ::ops::v1::SENDING) by_attempt.emplace(row.attempts(), row);
        return row.status() == ::ops::v1::FAILED;
      },
      absl::Seconds(30), absl::Milliseconds(20)));
  EXPECT_EQ(row.attempts(), 4);
  EXPECT_EQ(row.max_attempts(), 4);
  for (const auto& [attempt, r] : by_attempt) {
    const int64_t delay = TimeUtil::TimestampToMilliseconds(r.next_retry_at()) -
                          TimeUtil::TimestampToMilliseconds(r.last_attempt_at());
    std::cout << "attempt " << attempt << ": next retry after " << delay << " ms\n";
    EXPECT_EQ(delay, 400 * attempt) << "attempt " << attempt;
  }
  EXPECT_GE(by_attempt.size(), 3u);  // the polls saw most attempts
  for (int n = 2; n <= 4; ++n) {
    if (!by_attempt.count(n) || !by_attempt.count(n - 1)) continue;
    const int64_t gap = TimeUtil::TimestampToMilliseconds(by_attempt[n].last_attempt_at()) -
                        TimeUtil::TimestampToMilliseconds(by_attempt[n - 1].last_attempt_at());
    EXPECT_GE(gap, 400 * (n - 1)) << "attempt " << n << " came too early";
  }

  // Every row ends FAILED and is alerted at Alertmanager.
  ASSERT_TRUE(
      PollUntil([&] { return OpsStats(recovery).failed() == kPayments; }, absl::Seconds(30)));
  std::string alerts;
  ASSERT_TRUE(PollUntil(
      [&] {
        alerts = alertmanager.Alerts();
        return alerts.find(ids[0]) != std::string::npos &&
               alerts.find(ids.back()) != std::string::npos;
      },
      absl::Seconds(30), absl::Milliseconds(300)))
      << alerts;
  EXPECT_NE(alerts.find("OutboxMessageFailed"), std::string::npos);
  EXPECT_NE(alerts.find("\"runbook_url\":\"docs/operations.md#outboxmessagefailed\""),
            std::string::npos)
      << alerts;
  EXPECT_NE(recovery.process.Log().find("alert alertname=OutboxMessageFailed"), std::string::npos);

  // Accounting replaces the bad consumer. Every copy was dead-lettered, so
  // nothing is booked and FAILED stays FAILED until the operator re-drives;
  // then every row reaches SENT.
  sink.reset();
  services.StartAccounting();
  grpc::ClientContext dry_ctx;
  ::ops::v1::RedriveFailedRequest dry;
  dry.set_dry_run(true);
  ::ops::v1::RedriveFailedResponse dry_resp;
  ASSERT_OK(
      client::FromGrpc(recovery.ops->RedriveFailed(&dry_ctx, dry, &dry_resp), "RedriveFailed"));
  EXPECT_EQ(dry_resp.count(), kPayments);
  EXPECT_EQ(OpsStats(recovery).failed(), kPayments);  // dry run changed nothing

  grpc::ClientContext one_ctx;
  ::ops::v1::RedriveMessageRequest one;
  one.set_message_id(ids[0]);
  ::ops::v1::OutboxMessage redriven;
  ASSERT_OK(
      client::FromGrpc(recovery.ops->RedriveMessage(&one_ctx, one, &redriven), "RedriveMessage"));
  EXPECT_EQ(redriven.status(), ::ops::v1::SENDING);
  EXPECT_EQ(redriven.attempts(), 0);
  grpc::ClientContext again_ctx;
  grpc::Status again = recovery.ops->RedriveMessage(&again_ctx, one, &redriven);
  EXPECT_EQ(again.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << again.error_message();

  grpc::ClientContext all_ctx;
  ::ops::v1::RedriveFailedResponse all;
  ASSERT_OK(client::FromGrpc(recovery.ops->RedriveFailed(&all_ctx, {}, &all), "RedriveFailed"));
  EXPECT_EQ(all.count(), kPayments - 1);
  ASSERT_TRUE(PollUntil([&] { return CountSent(services) == kPayments; }, absl::Seconds(60),
                        absl::Milliseconds(250)));
  ExpectOneVoucherEach(services, kPayments);
  auto stats = OpsStats(recovery);
  EXPECT_EQ(stats.sent(), kPayments);
  EXPECT_EQ(stats.sending(), 0);
  EXPECT_GT(stats.republished_total(), kPayments);
  // Every FAILED alert resolved at Alertmanager once its row was closed.
  ASSERT_TRUE(PollUntil(
      [&] {
        alerts = alertmanager.Alerts();
        return alerts.find("OutboxMessageFailed") == std::string::npos;
      },
      absl::Seconds(20), absl::Milliseconds(300)))
      << alerts;
  // The dead-lettered copies are settled now (their rows are SENT and their
  // signatures verify): recovery removes them from the DLQ, each audited,
  // and that alert resolves without a purge or a re-drive of dead letters.
  ASSERT_TRUE(PollUntil(
      [&] {
        alerts = alertmanager.Alerts();
        return alerts.find("OutboxDeadLetters") == std::string::npos;
      },
      absl::Seconds(60), absl::Milliseconds(300)))
      << alerts;
  grpc::ClientContext dl_ctx;
  ::ops::v1::RedriveDeadLettersRequest dl;
  dl.set_queue(services.pay_queue());
  ::ops::v1::RedriveDeadLettersResponse dl_resp;
  ASSERT_OK(client::FromGrpc(recovery.ops->RedriveDeadLetters(&dl_ctx, dl, &dl_resp),
                             "RedriveDeadLetters"));
  EXPECT_EQ(dl_resp.count(), 0);  // nothing was left to re-drive
  EXPECT_NE(recovery.process.Log().find("dead_letter_settled_removed"), std::string::npos);
  ExpectOneVoucherEach(services, kPayments);
  EXPECT_EQ(OpsStats(recovery).alerts_active(), 0);
  EXPECT_EQ(recovery.process.Terminate(), 0);
}

TEST(RecoveryTest, ALateAcknowledgementClosesAFailedRowAndResolvesItsAlert) {
  constexpr int kPayments = 10;
  const Env env = {{"RECOVERY_BASE_DELAY", "300ms"},
                   {"RECOVERY_MAX_DELAY", "1s"},
                   {"RECOVERY_MAX_ATTEMPTS", "2"},
                   {"RECOVERY_IDLE_SLEEP", "100ms"},
                   {"RECOVERY_HOUSEKEEPING_EVERY", "500ms"}};
  ServiceSet services(env);
  Alertmanager alertmanager(services.dir());
  services.StartPayment();
  auto& recovery = services.StartRecovery("r1", {{"ALERTMANAGER_URL", alertmanager.url()}});
  std::vector<std::string> ids;
  {
    // The consumer dead-letters every copy: the budget is spent, rows FAIL.
    QueueSink sink(services.broker().amqp_url, services.pay_queue(), QueueSink::Mode::kDeadLetter);
    ids = CreateMessages(services, "late-", kPayments);
    ASSERT_TRUE(
        PollUntil([&] { return OpsStats(recovery).failed() == kPayments; }, absl::Seconds(30)));
  }
  std::string alerts;
  ASSERT_TRUE(PollUntil(
      [&] {
        alerts = alertmanager.Alerts();
        return alerts.find(ids[0]) != std::string::npos &&
               alerts.find(ids.back()) != std::string::npos;
      },
      absl::Seconds(20), absl::Milliseconds(300)))
      << alerts;

  // The operator fixes the consumer and moves the dead letters back: accounting
  // books each payment once, and its acknowledgement closes the FAILED row.
  services.StartAccounting();
  grpc::ClientContext dl_ctx;
  ::ops::v1::RedriveDeadLettersRequest dl;
  dl.set_queue(services.pay_queue());
  ::ops::v1::RedriveDeadLettersResponse dl_resp;
  ASSERT_OK(client::FromGrpc(recovery.ops->RedriveDeadLetters(&dl_ctx, dl, &dl_resp),
                             "RedriveDeadLetters"));
  ASSERT_TRUE(PollUntil([&] { return CountSent(services) == kPayments; }, absl::Seconds(20),
                        absl::Milliseconds(200)));
  ExpectOneVoucherEach(services, kPayments);
  for (const auto& p : services.AllPayments()) {
    EXPECT_EQ(p.outbox().status(), ::payment::v1::SENT);
    EXPECT_FALSE(p.outbox().last_error().empty()) << "why it had failed is kept";
  }
  const std::string metrics = services.payment().Log();
  EXPECT_NE(metrics.find("late_ack rows="), std::string::npos);
  ASSERT_TRUE(PollUntil(
      [&] {
        alerts = alertmanager.Alerts();
        return alerts.find("OutboxMessageFailed") == std::string::npos &&
               alerts.find("OutboxDeadLetters") == std::string::npos;
      },
      absl::Seconds(20), absl::Milliseconds(300)))
      << alerts;
  EXPECT_NE(recovery.process.Log().find("alert_resolved alertname=OutboxMessageFailed"),
            std::string::npos);
  const CheckResult check = RunChecker(services);
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

TEST(RecoveryTest, OneActiveInstanceAndHandOverWithinTheLeaseTime) {
  constexpr int kPayments = 20;
  const Env env = {
      {"RECOVERY_BASE_DELAY", "300ms"},
      {"RECOVERY_MAX_DELAY", "600ms"},
      {"RECOVERY_MAX_ATTEMPTS", "1000"},
      {"RECOVERY_IDLE_SLEEP", "100ms"},
      {"RECOVERY_LEASE_TTL", "2s"},
      // More than 5 rows SENDING for over 1 s is a backlog: one alert, not one per loop.
      {"RECOVERY_BACKLOG_AGE", "1s"},
      {"RECOVERY_BACKLOG_THRESHOLD", "5"},
      {"RECOVERY_HOUSEKEEPING_EVERY", "300ms"}};
  ServiceSet services(env);
  services.StartPayment();
  // A consumer that acks and loses every message: re-publishing is what helps.
  auto sink = std::make_unique<QueueSink>(services.broker().amqp_url, services.pay_queue(),
                                          QueueSink::Mode::kDrop);
  auto& a = services.StartRecovery("a");
  auto& b = services.StartRecovery("b");
  CreatePayments(services, "lease-", kPayments);

  ASSERT_TRUE(PollUntil(
      [&] {
        return OpsStats(a).republished_total() + OpsStats(b).republished_total() >= 2 * kPayments;
      },
      absl::Seconds(30)));
  auto sa = OpsStats(a), sb = OpsStats(b);
  ASSERT_NE(sa.lease_held(), sb.lease_held()) << "exactly one instance holds the lease";
  auto& active = sa.lease_held() ? a : b;
  auto& standby = sa.lease_held() ? b : a;
  EXPECT_EQ(OpsStats(standby).republished_total(), 0) << "the standby re-published";
  EXPECT_EQ(OpsStats(standby).lease_holder(), sa.lease_held() ? "a" : "b");

  auto count = [](const std::string& log, const std::string& needle) {
    int n = 0;
    for (size_t at = log.find(needle); at != std::string::npos; at = log.find(needle, at + 1)) ++n;
    return n;
  };
  ASSERT_TRUE(PollUntil([&] { return count(active.process.Log(), "alertname=OutboxBacklog") >= 1; },
                        absl::Seconds(10)));
  // Several more housekeeping passes (every 300 ms) raise no second alert.
  EXPECT_FALSE(
      PollUntil([&] { return count(active.process.Log(), "alertname=OutboxBacklog") >= 2; },
                absl::Seconds(1)));
  EXPECT_EQ(count(standby.process.Log(), "alertname=OutboxBacklog"), 0);

  const absl::Time killed = absl::Now();
  active.process.Kill();  // SIGKILL: no lease release
  ASSERT_TRUE(PollUntil(
      [&] {
        auto s = OpsStats(standby);
        return s.lease_held() && s.republished_total() > 0;
      },
      absl::Seconds(30), absl::Milliseconds(50)));
  // The lease had at most 2 s left when the holder died; the standby wakes
  // at its expiry and re-publishes in its first round. How soon after that
  // is the machine's to decide: printed, not asserted.
  const absl::Duration handover = absl::Now() - killed;
  std::cout << "hand-over after SIGKILL: " << absl::FormatDuration(handover) << " (lease ttl 2s)\n";

  sink.reset();
  services.StartAccounting();
  ASSERT_TRUE(PollUntil([&] { return CountSent(services) == kPayments; }, absl::Seconds(60),
                        absl::Milliseconds(250)));
  ExpectOneVoucherEach(services, kPayments);
}

TEST(RecoveryTest, AnInstanceThatCannotPublishGivesTheLeaseUp) {
  const Env env = {{"RECOVERY_BASE_DELAY", "300ms"},  {"RECOVERY_MAX_DELAY", "600ms"},
                   {"RECOVERY_MAX_ATTEMPTS", "1000"}, {"RECOVERY_IDLE_SLEEP", "100ms"},
                   {"RECOVERY_LEASE_TTL", "2s"},      {"RECOVERY_MAX_PUBLISH_FAILURES", "3"}};
  ServiceSet services(env);
  services.StartPayment();  // accounting down: rows stay SENDING and come due
  QueueSink sink(services.broker().amqp_url, services.pay_queue(), QueueSink::Mode::kDrop);
  CreatePayments(services, "yield-", 10);
  // "cut-off" holds the lease first but its broker address is a closed port.
  auto& cut_off =
      services.StartRecovery("cut-off", {{"AMQP_URL", "amqp://nobody:nothing@127.0.0.1:1/%2F"}});
  ASSERT_FALSE(cut_off.process.WaitForLog("lease_acquired", absl::Seconds(10)).empty());
  auto& healthy = services.StartRecovery("healthy");
  ASSERT_FALSE(cut_off.process.WaitForLog("lease_yielded", absl::Seconds(10)).empty());
  ASSERT_TRUE(PollUntil(
      [&] {
        auto s = OpsStats(healthy);
        return s.lease_held() && s.republished_total() > 0;
      },
      absl::Seconds(5), absl::Milliseconds(50)));
  EXPECT_FALSE(OpsStats(cut_off).lease_held());
  EXPECT_EQ(OpsStats(cut_off).republished_total(), 0);
  EXPECT_TRUE(cut_off.process.Running());  // losing the broker never kills a service
}

}  // namespace
}  // namespace outbox::testing
