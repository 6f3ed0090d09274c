// Chaos under load: random SIGKILLs of every service and a broker stop/start
// while payments keep coming; then everything must settle to SENT with one
// voucher each (audited by outbox_check). Also: poison messages are
// dead-lettered and alerted (resolved once the dead letters are purged)
// without blocking the queues, a duplicated
// delivery books nothing twice, a replayed acknowledgement is harmless.
#include <gtest/gtest.h>

#include <random>

#include "absl/strings/str_cat.h"
#include "client/channel.h"
#include "events/v1/events.pb.h"
#include "shared/amqp/internal/amqp_client.h"
#include "shared/testing/status_matchers.h"
#include "tests/support/alertmanager.h"
#include "tests/support/load.h"

namespace outbox::testing {
namespace {

const Env kFastRecovery = {{"RECOVERY_BASE_DELAY", "500ms"},
                           {"RECOVERY_MAX_DELAY", "2s"},
                           {"RECOVERY_MAX_ATTEMPTS", "1000"},
                           {"RECOVERY_IDLE_SLEEP", "200ms"},
                           {"RECOVERY_LEASE_TTL", "2s"}};

TEST(ChaosTest, RandomKillsAndABrokerRestartUnderLoad) {
  constexpr int kPayments = 800;
  ServiceSet services(kFastRecovery);
  services.StartAll();
  services.StartRecovery("r");
  const unsigned seed = std::random_device{}();
  std::mt19937 rng(seed);
  std::cout << "chaos seed " << seed << "\n";

  PaymentLoad load(services, "chaos-", kPayments, 4, absl::Milliseconds(8));
  std::map<std::string, int> faults;
  // Each service is killed twice, in random order, with the broker restarted once in between.
  std::vector<std::string> plan = {"payment",  "payment",  "accounting", "accounting",
                                   "recovery", "recovery", "broker"};
  std::shuffle(plan.begin(), plan.end(), rng);
  for (const std::string& victim : plan) {
    absl::SleepFor(absl::Milliseconds(std::uniform_int_distribution<int>(300, 1200)(rng)));
    if (victim == "payment") {
      services.payment().Kill();
      services.StartPayment();
    } else if (victim == "accounting") {
      services.accounting().Kill();
      services.StartAccounting();
    } else if (victim == "recovery") {
      services.recovery("r").process.Kill();
      services.StartRecovery("r");
    } else {
      StopBroker(services.broker());
      StartBroker(services.broker());
    }
    ++faults[victim == "broker" ? "broker_restart" : victim + "_sigkill"];
  }
  load.Join();
  ASSERT_EQ(load.created(), kPayments);
  const int sent = WaitAllSent(services, kPayments, absl::Seconds(120));
  const CheckResult check = RunChecker(services);
  std::cout << "faults injected:";
  for (const auto& [kind, n] : faults) std::cout << " " << kind << "=" << n;
  std::cout << "\nfinal: payments=" << kPayments << " SENT=" << sent
            << " vouchers=" << services.AllVouchers().size() << " client_retries=" << load.retries()
            << " outbox_check_exit=" << check.exit_code << "\n";
  EXPECT_EQ(sent, kPayments);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_EQ(services.AllVouchers().size(), static_cast<size_t>(kPayments));
}

class QueueTest : public ::testing::Test {
 protected:
  std::unique_ptr<AmqpConnection> Connect(const ServiceSet& s) {
    auto url = AmqpUrl::Parse(s.broker().amqp_url);
    auto c = AmqpConnection::Connect(*url, "test-injector");
    EXPECT_OK(c);
    EXPECT_OK((*c)->EnableConfirms());
    return std::move(c).value();
  }
};

TEST_F(QueueTest, PoisonIsDeadLetteredAndAlertedDuplicatesAreHarmless) {
  Env env = kFastRecovery;
  env["RECOVERY_HOUSEKEEPING_EVERY"] = "500ms";
  ServiceSet services(env);
  Alertmanager alertmanager(services.dir());
  const Env alerting = {{"ALERTMANAGER_URL", alertmanager.url()}};
  services.StartAccounting(alerting);
  services.StartPayment(alerting);
  auto& recovery = services.StartRecovery("r", alerting);
  {  // its threads are joined here
    PaymentLoad first(services, "poison-a-", 20, 2);
  }
  ASSERT_EQ(WaitAllSent(services, 20, absl::Seconds(30)), 20);
  auto payments = services.AllPayments();

  auto conn = Connect(services);
  events::v1::PaymentAccounted replay;
  replay.set_message_id(payments[1].outbox().message_id());
  replay.set_payment_id(payments[1].payment_id());
  replay.set_voucher_id("replayed");
  // The original PaymentCreated of payment 0, as stored in its outbox row.
  grpc::ClientContext ctx;
  ::ops::v1::GetMessageRequest get;
  get.set_message_id(payments[0].outbox().message_id());
  ::ops::v1::OutboxMessage original;
  ASSERT_OK(client::FromGrpc(recovery.ops->GetMessage(&ctx, get, &original), "GetMessage"));

  // A well-formed event for a new payment whose reply_to names no queue: its
  // reply could never be delivered, so it is dead-lettered BEFORE booking.
  events::v1::PaymentCreated stray;
  stray.set_message_id("stray-reply-1");
  stray.set_payment_id("stray-payment-1");
  stray.set_payer_account("payer-x");
  stray.set_payee_account("payee-y");
  stray.set_amount_minor(777);
  stray.set_currency("EUR");
  std::vector<OutgoingMessage> inject = {
      {services.pay_queue(), "poison-pay-1", "\x08\xff\xff garbage", services.acc_queue(), ""},
      {services.acc_queue(), "poison-acc-1", "\xff\xfe not a protobuf", "", ""},
      {services.pay_queue(), original.message_id(), original.payload(), services.acc_queue(),
       "PaymentCreated"},  // the same message delivered a second time
      {services.pay_queue(), original.message_id(), original.payload(), services.acc_queue(),
       "PaymentCreated"},  // and a third
      {services.acc_queue(), replay.message_id(), replay.SerializeAsString(), "",
       ""},  // ack replayed
      // A valid duplicate whose reply_to names no queue: poison too, never redelivered forever.
      {services.pay_queue(), original.message_id(), original.payload(), "no-such-queue",
       "PaymentCreated"},
      {services.pay_queue(), stray.message_id(), stray.SerializeAsString(), "no-such-queue",
       "PaymentCreated"},
  };
  // Signed as the services sign (their keys): what is tested here is what
  // happens after the signature check (e2e.security covers forged messages).
  for (OutgoingMessage& m : inject) m = services.Signed(m);
  auto confirmed = conn->PublishConfirmed(inject, absl::Seconds(10));
  ASSERT_OK(confirmed);
  std::cout
      << "injected: 2 undecodable messages, 2 duplicate deliveries, 1 replayed ack, "
         "1 duplicate with an unroutable reply_to, 1 new payment with an unroutable reply_to\n";

  // The queues keep flowing.
  {  // its threads are joined here
    PaymentLoad second(services, "poison-b-", 20, 2);
  }
  ASSERT_EQ(WaitAllSent(services, 40, absl::Seconds(30)), 40);

  auto dlq_total = [&](const std::string& queue) {
    grpc::ClientContext c;
    ::ops::v1::ListDeadLettersRequest req;
    req.set_queue(queue);
    ::ops::v1::ListDeadLettersResponse resp;
    grpc::Status s = recovery.ops->ListDeadLetters(&c, req, &resp);
    EXPECT_OK(client::FromGrpc(s, "ListDeadLetters"));
    std::string ids;
    for (const auto& m : resp.messages()) ids += m.message_id() + " ";
    return std::make_pair(resp.total(), ids);
  };
  // The duplicate with the unroutable reply_to is parked too, but its row is
  // SENT (its first copy was booked) and its signature verifies: recovery's
  // housekeeping removes that settled copy. The two that matter stay.
  ASSERT_TRUE(PollUntil(
      [&] {
        return dlq_total(services.pay_queue()) ==
               std::make_pair<int64_t, std::string>(2, "poison-pay-1 stray-reply-1 ");
      },
      absl::Seconds(30)))
      << dlq_total(services.pay_queue()).second;
  EXPECT_NE(recovery.process.Log().find(
                absl::StrCat("dead_letter_settled_removed message_id=", original.message_id())),
            std::string::npos);
  {
    grpc::ClientContext v_ctx;
    ::accounting::v1::GetVoucherRequest vreq;
    vreq.set_payment_id("stray-payment-1");
    ::accounting::v1::Voucher v;
    EXPECT_EQ(services.accounting_api().GetVoucher(&v_ctx, vreq, &v).error_code(),
              grpc::StatusCode::NOT_FOUND)
        << "a message whose reply cannot be delivered was booked";
  }
  EXPECT_EQ(dlq_total(services.acc_queue()).first, 1);
  EXPECT_EQ(dlq_total(services.acc_queue()).second, "poison-acc-1 ");
  EXPECT_NE(services.accounting().Log().find("message_dead_lettered message_id=poison-pay-1"),
            std::string::npos);
  EXPECT_NE(services.payment().Log().find("message_dead_lettered message_id=poison-acc-1"),
            std::string::npos);
  // One alert per dead-letter queue that holds messages, raised by recovery.
  const std::string pay_dlq = "\"queue\":\"" + services.pay_queue() + ".DLQ\"";
  const std::string acc_dlq = "\"queue\":\"" + services.acc_queue() + ".DLQ\"";
  std::string alerts;
  ASSERT_TRUE(PollUntil(
      [&] {
        alerts = alertmanager.Alerts();
        return alerts.find(pay_dlq) != std::string::npos &&
               alerts.find(acc_dlq) != std::string::npos;
      },
      absl::Seconds(30), absl::Milliseconds(300)))
      << alerts;
  EXPECT_NE(alerts.find("OutboxDeadLetters"), std::string::npos);

  // Re-driving puts the message back on its queue; still poison, it is
  // dead-lettered again rather than redelivered forever.
  grpc::ClientContext rc;
  ::ops::v1::RedriveDeadLettersRequest rr;
  rr.set_queue(services.pay_queue());
  ::ops::v1::RedriveDeadLettersResponse rresp;
  ASSERT_OK(
      client::FromGrpc(recovery.ops->RedriveDeadLetters(&rc, rr, &rresp), "RedriveDeadLetters"));
  EXPECT_EQ(rresp.count(), 2);
  ASSERT_TRUE(
      PollUntil([&] { return dlq_total(services.pay_queue()).first == 2; }, absl::Seconds(30)));

  // An operator purges what is left: both alerts resolve at Alertmanager.
  ASSERT_OK(conn->Purge(services.pay_queue() + ".DLQ"));
  ASSERT_OK(conn->Purge(services.acc_queue() + ".DLQ"));
  ASSERT_TRUE(PollUntil(
      [&] {
        alerts = alertmanager.Alerts();
        return alerts.find(pay_dlq) == std::string::npos &&
               alerts.find(acc_dlq) == std::string::npos;
      },
      absl::Seconds(30), absl::Milliseconds(300)))
      << alerts;
  EXPECT_NE(recovery.process.Log().find("alert_resolved alertname=OutboxDeadLetters"),
            std::string::npos);

  // Duplicates booked nothing; the replayed ack changed nothing.
  EXPECT_EQ(services.AllVouchers().size(), 40u);
  const CheckResult check = RunChecker(services);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  EXPECT_EQ(services.accounting().Terminate(), 0);
  // Accounting dead-lettered 3 at first and the 2 re-driven again (the
  // settled duplicate was removed by recovery, not re-driven).
  const std::string log = services.accounting().Log();
  EXPECT_NE(log.find("dead_lettered=5"), std::string::npos)
      << log.substr(log.size() > 400 ? log.size() - 400 : 0);
}

}  // namespace
}  // namespace outbox::testing
