// Guarantee 4: a crash at any named point loses no payment and books no
// voucher twice. For each point: load, crash there (SIGKILL via the
// failpoint), restart the process, let recovery finish, audit the stores
// (RunChecker: outbox_check on SQLite, the services' reads on PostgreSQL).
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "service_kit/failpoints.h"
#include "shared/runtime/internal/failpoint.h"
#include "tests/support/load.h"
#include "tests/support/queue_sink.h"

namespace outbox::testing {
namespace {

enum class Target { kPayment, kAccounting, kRecovery };

struct CrashCase {
  const char* point;
  Target target;
  int hit;  // crash at this hit of the point
  // Accounting starts only after the crash; until then a consumer that loses
  // what it takes keeps PAY_QUEUE consumed, so rows come due and recovery
  // (which holds while nobody consumes) claims and re-publishes them.
  bool accounting_late;
};

std::string Name(const ::testing::TestParamInfo<CrashCase>& info) {
  std::string n = info.param.point;
  for (char& c : n) {
    if (c == '.') c = '_';
  }
  return n;
}

class CrashPointTest : public ::testing::TestWithParam<CrashCase> {};

TEST_P(CrashPointTest, NothingLostNothingTwice) {
  constexpr int kPayments = 300;
  const CrashCase& c = GetParam();
  ServiceSet services(Env{{"RECOVERY_BASE_DELAY", "500ms"},
                          {"RECOVERY_MAX_DELAY", "2s"},
                          {"RECOVERY_MAX_ATTEMPTS", "100"},
                          {"RECOVERY_IDLE_SLEEP", "200ms"},
                          {"RECOVERY_LEASE_TTL", "2s"}});
  const Env armed = {{"OUTBOX_FAILPOINTS", absl::StrCat(c.point, "=crash@", c.hit)}};
  auto env_for = [&](Target t) { return c.target == t ? armed : Env{}; };

  if (!c.accounting_late) services.StartAccounting(env_for(Target::kAccounting));
  services.StartPayment(env_for(Target::kPayment));
  std::unique_ptr<QueueSink> lossy;
  if (c.accounting_late) {
    lossy = std::make_unique<QueueSink>(services.broker().amqp_url, services.pay_queue(),
                                        QueueSink::Mode::kDrop);
  }
  services.StartRecovery("r", env_for(Target::kRecovery));
  // Accounting's points count batches, and a batch takes whatever is waiting
  // (up to its prefetch): an unpaced load can arrive in two batches and never
  // reach hit 3. So does payment's reply point, which counts the replies
  // received, one per accounting batch, and its publish point, which counts
  // the relay's rounds that read confirms: a fast load on a busy machine is
  // confirmed in a few big rounds and may never reach hit 5. Paced, the
  // payments arrive over at least 1.5 s in many (at 5 ms a pause, 375 ms,
  // a pristine run on a loaded machine once settled them all in two rounds).
  const std::string point = c.point;
  const absl::Duration pause = c.target == Target::kAccounting ||
                                       point == kFpPaymentReplyBeforeRecordAcks ||
                                       point == kFpPaymentAfterPublishBeforeReply
                                   ? absl::Milliseconds(20)
                                   : absl::ZeroDuration();
  PaymentLoad load(services, absl::StrCat("crash-", c.point, "-"), kPayments, 4, pause);

  Process& victim = c.target == Target::kPayment      ? services.payment()
                    : c.target == Target::kAccounting ? services.accounting()
                                                      : services.recovery("r").process;
  ASSERT_TRUE(PollUntil([&] { return !victim.Running(); }, absl::Seconds(60)))
      << c.point << " was never reached";
  EXPECT_EQ(victim.exit_code(), 128 + 9);  // SIGKILL
  EXPECT_NE(victim.Log().find(absl::StrCat("failpoint_crash point=", c.point)), std::string::npos);
  const int created_at_crash = load.created();

  switch (c.target) {
    case Target::kPayment: services.StartPayment(); break;
    case Target::kAccounting: services.StartAccounting(); break;
    case Target::kRecovery: services.StartRecovery("r"); break;
  }
  lossy.reset();
  if (c.accounting_late) services.StartAccounting();
  load.Join();
  ASSERT_EQ(load.created(), kPayments);

  const int sent = WaitAllSent(services, kPayments, absl::Seconds(90));
  const CheckResult check = RunChecker(services);
  std::cout << "injected: " << c.point << "=crash@" << c.hit << " (after " << created_at_crash
            << " payments acknowledged to clients, " << load.retries() << " client retries)\n"
            << "final: payments=" << kPayments << " SENT=" << sent
            << " vouchers=" << services.AllVouchers().size() << "\n"
            << "outbox_check: exit " << check.exit_code << " "
            << check.output.substr(0, check.output.find("\"checks\"")) << "...\n";
  EXPECT_EQ(sent, kPayments);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_NE(check.output.find("\"ok\": true"), std::string::npos) << check.output;
  EXPECT_EQ(services.AllVouchers().size(), static_cast<size_t>(kPayments));
}

// Payments booked, then accounting dies before its reply and comes back
// with tighter rules (EUR, the payments' currency, no longer kept): the
// redelivered messages of the booked payments are answered as booked, not
// rejected, so their rows end SENT; only the payments never booked are
// rejected. outbox_check finds no FAILED row with a voucher.
TEST(RuleChangeTest, ABookedPaymentIsAnsweredAsBookedAfterARestartWithTighterRules) {
  constexpr int kPayments = 20;
  ServiceSet services(Env{{"RECOVERY_BASE_DELAY", "500ms"},
                          {"RECOVERY_MAX_DELAY", "2s"},
                          {"RECOVERY_IDLE_SLEEP", "200ms"},
                          {"RECOVERY_LEASE_TTL", "2s"}});
  services.StartPayment();
  services.StartRecovery("r");
  CreatePayments(services, "rules-", kPayments);
  services.StartAccounting(
      {{"OUTBOX_FAILPOINTS", absl::StrCat(kFpAccountingAfterCommitBeforeReply, "=crash@1")}});
  ASSERT_TRUE(PollUntil([&] { return !services.accounting().Running(); }, absl::Seconds(60)));
  // Read from the store: accounting is down.
  const int64_t booked = services.Count(services.accounting_db(), "SELECT count(*) FROM vouchers");
  ASSERT_GE(booked, 1);

  services.StartAccounting({{"ACCEPTED_CURRENCIES", "USD"}});
  std::map<std::string, std::string> closed;  // payment id -> SENT or FAILED
  ASSERT_TRUE(PollUntil(
      [&] {
        closed.clear();
        for (const auto& p : services.AllPayments()) {
          if (p.outbox().status() == ::payment::v1::SENT) closed[p.payment_id()] = "SENT";
          if (p.outbox().status() == ::payment::v1::FAILED) closed[p.payment_id()] = "FAILED";
        }
        return closed.size() == static_cast<size_t>(kPayments);
      },
      absl::Seconds(60)));
  int64_t sent = 0;
  for (const auto& [id, status] : closed) sent += status == "SENT";
  std::cout << "booked before the restart: " << booked << " of " << kPayments
            << "; SENT after it: " << sent << "\n";
  EXPECT_EQ(sent, booked);
  EXPECT_EQ(services.AllVouchers().size(), static_cast<size_t>(booked));
  const CheckResult check = RunChecker(services);
  EXPECT_EQ(check.exit_code, 0) << check.output;
}

INSTANTIATE_TEST_SUITE_P(
    EveryPoint, CrashPointTest,
    ::testing::Values(CrashCase{kFpPaymentBeforeCommit, Target::kPayment, 5, false},
                      CrashCase{kFpPaymentAfterCommitBeforePublish, Target::kPayment, 5, false},
                      CrashCase{kFpPaymentAfterPublishBeforeReply, Target::kPayment, 5, false},
                      CrashCase{kFpPaymentReplyBeforeRecordAcks, Target::kPayment, 3, false},
                      CrashCase{kFpAccountingAfterCommitBeforeReply, Target::kAccounting, 3, false},
                      CrashCase{kFpAccountingAfterReplyBeforeAck, Target::kAccounting, 3, false},
                      CrashCase{kFpRecoveryAfterClaimBeforePublish, Target::kRecovery, 1, true}),
    Name);

}  // namespace
}  // namespace outbox::testing
