// End to end on real parts: the real binaries, a real RabbitMQ node, real
// SQLite files, real gRPC over loopback sockets.
#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "shared/observability/http_client.h"
#include "tests/support/alertmanager.h"
#include "tests/support/services.h"

namespace outbox::testing {
namespace {

using ::payment::v1::CreatePaymentRequest;
using ::payment::v1::CreatePaymentResponse;

CreatePaymentRequest Request(const std::string& key, int64_t amount) {
  CreatePaymentRequest r;
  r.set_idempotency_key(key);
  r.set_payer_account("acct-alice");
  r.set_payee_account("acct-bob");
  r.set_amount_minor(amount);
  r.set_currency("EUR");
  r.set_description("e2e");
  return r;
}

grpc::Status Create(ServiceSet& s, const CreatePaymentRequest& req, CreatePaymentResponse* resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return s.payments().CreatePayment(&ctx, req, resp);
}

int CountStatus(const std::vector<::payment::v1::Payment>& payments, ::payment::v1::OutboxStatus st) {
  int n = 0;
  for (const auto& p : payments) n += p.outbox().status() == st;
  return n;
}

TEST(EndToEndTest, EveryPaymentReachesSentWithExactlyOneVoucher) {
  const int payment_metrics = FreeLoopbackPort();
  const int accounting_metrics = FreeLoopbackPort();
  ServiceSet services(Env{{"RECOVERY_BASE_DELAY", "2s"},
                          {"PAYMENT_METRICS_LISTEN", absl::StrCat("127.0.0.1:", payment_metrics)},
                          {"ACCOUNTING_METRICS_LISTEN", absl::StrCat("127.0.0.1:", accounting_metrics)}});
  services.StartAll();
  constexpr int kThreads = 8;
  constexpr int kEach = 40;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        CreatePaymentResponse resp;
        grpc::Status s = Create(services, Request(absl::StrCat("flow-", t, "-", i), 100 + i), &resp);
        if (!s.ok() || resp.replayed() || resp.payment().outbox().status() != ::payment::v1::SENDING)
          ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0);

  std::vector<::payment::v1::Payment> payments;
  const bool all_sent = PollUntil([&] {
    payments = services.AllPayments();
    return CountStatus(payments, ::payment::v1::SENT) == kThreads * kEach;
  }, absl::Seconds(60), absl::Milliseconds(250));
  ASSERT_TRUE(all_sent) << "SENT " << CountStatus(payments, ::payment::v1::SENT) << " of "
                        << payments.size();
  ASSERT_EQ(payments.size(), static_cast<size_t>(kThreads * kEach));

  auto vouchers = services.AllVouchers();
  ASSERT_EQ(vouchers.size(), payments.size());
  std::map<std::string, ::accounting::v1::Voucher> by_payment;
  for (const auto& v : vouchers) {
    EXPECT_TRUE(by_payment.emplace(v.payment_id(), v).second) << "second voucher for " << v.payment_id();
  }
  for (const auto& p : payments) {
    auto it = by_payment.find(p.payment_id());
    ASSERT_NE(it, by_payment.end()) << "no voucher for " << p.payment_id();
    EXPECT_EQ(it->second.amount_minor(), p.amount_minor());
    EXPECT_EQ(it->second.currency(), p.currency());
    EXPECT_EQ(it->second.debit_account(), p.payer_account());
    EXPECT_EQ(it->second.credit_account(), p.payee_account());
    EXPECT_EQ(it->second.message_id(), p.outbox().message_id());
    EXPECT_TRUE(p.outbox().has_sent_at());
  }
  // GetVoucher and GetPayment agree with the lists.
  grpc::ClientContext ctx;
  ::accounting::v1::GetVoucherRequest gv;
  gv.set_payment_id(payments[0].payment_id());
  ::accounting::v1::Voucher v;
  ASSERT_TRUE(services.accounting_api().GetVoucher(&ctx, gv, &v).ok());
  EXPECT_EQ(v.voucher_id(), by_payment[payments[0].payment_id()].voucher_id());

  // Prometheus metrics count what happened.
  auto payment_text = HttpGet(absl::StrCat("http://127.0.0.1:", payment_metrics, "/metrics"), absl::Seconds(5));
  ASSERT_TRUE(payment_text.ok()) << payment_text.status();
  EXPECT_NE(payment_text->body.find(absl::StrCat("outbox_payments_created_total ", kThreads * kEach)),
            std::string::npos) << payment_text->body;
  EXPECT_NE(payment_text->body.find(absl::StrCat("outbox_acks_total{result=\"marked_sent\"} ", kThreads * kEach)),
            std::string::npos) << payment_text->body;
  auto accounting_text = HttpGet(absl::StrCat("http://127.0.0.1:", accounting_metrics, "/metrics"), absl::Seconds(5));
  ASSERT_TRUE(accounting_text.ok());
  EXPECT_NE(accounting_text->body.find(absl::StrCat("outbox_vouchers_created_total ", kThreads * kEach)),
            std::string::npos) << accounting_text->body;

  // SIGTERM shuts both down cleanly.
  EXPECT_EQ(services.payment().Terminate(), 0);
  EXPECT_EQ(services.accounting().Terminate(), 0);
}

TEST(EndToEndTest, ReplaysConflictsAndInvalidInputWriteNothingNew) {
  ServiceSet services;
  services.StartAll();
  CreatePaymentResponse first;
  ASSERT_TRUE(Create(services, Request("same-key", 500), &first).ok());
  EXPECT_FALSE(first.replayed());

  CreatePaymentResponse again;
  ASSERT_TRUE(Create(services, Request("same-key", 500), &again).ok());
  EXPECT_TRUE(again.replayed());
  EXPECT_EQ(again.payment().payment_id(), first.payment().payment_id());

  CreatePaymentResponse conflict;
  grpc::Status s = Create(services, Request("same-key", 501), &conflict);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::ALREADY_EXISTS) << s.error_message();

  struct Case {
    std::function<void(CreatePaymentRequest&)> mutate;
    std::string field;
  };
  std::vector<Case> cases = {
      {[](auto& r) { r.set_idempotency_key(""); }, "idempotency_key"},
      {[](auto& r) { r.set_payer_account(""); }, "payer_account"},
      {[](auto& r) { r.set_payee_account(std::string(65, 'x')); }, "payee_account"},
      {[](auto& r) { r.set_amount_minor(0); }, "amount_minor"},
      {[](auto& r) { r.set_amount_minor(-1); }, "amount_minor"},
      {[](auto& r) { r.set_currency("euro"); }, "currency"},
      {[](auto& r) { r.set_payee_account(r.payer_account()); }, "payee_account"},
      {[](auto& r) { r.set_description(std::string(300, 'd')); }, "description"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    CreatePaymentRequest req = Request(absl::StrCat("bad-", i), 100);
    cases[i].mutate(req);
    CreatePaymentResponse resp;
    grpc::Status bad = Create(services, req, &resp);
    EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << cases[i].field;
    EXPECT_NE(bad.error_message().find(cases[i].field), std::string::npos) << bad.error_message();
  }
  EXPECT_EQ(services.AllPayments().size(), 1u);

  grpc::ClientContext ctx;
  ::payment::v1::GetPaymentRequest get;
  get.set_payment_id("no-such-payment");
  ::payment::v1::Payment p;
  EXPECT_EQ(services.payments().GetPayment(&ctx, get, &p).error_code(), grpc::StatusCode::NOT_FOUND);

  grpc::ClientContext ctx2;
  ::payment::v1::ListPaymentsRequest list;
  list.set_page_token("garbage");
  ::payment::v1::ListPaymentsResponse lr;
  EXPECT_EQ(services.payments().ListPayments(&ctx2, list, &lr).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(EndToEndTest, HealthAndReflectionAnswerOnEveryService) {
  ServiceSet services;
  services.StartAll();
  for (auto channel : {services.payment_channel(), services.accounting_channel()}) {
    auto health = grpc::health::v1::Health::NewStub(channel);
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    ASSERT_TRUE(health->Check(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING);

    auto reflection = grpc::reflection::v1alpha::ServerReflection::NewStub(channel);
    grpc::ClientContext rctx;
    auto stream = reflection->ServerReflectionInfo(&rctx);
    grpc::reflection::v1alpha::ServerReflectionRequest rreq;
    rreq.set_list_services("");
    ASSERT_TRUE(stream->Write(rreq));
    stream->WritesDone();
    grpc::reflection::v1alpha::ServerReflectionResponse rresp;
    ASSERT_TRUE(stream->Read(&rresp));
    std::set<std::string> names;
    for (const auto& svc : rresp.list_services_response().service()) names.insert(svc.name());
    EXPECT_TRUE(names.count("payment.v1.PaymentService") || names.count("accounting.v1.AccountingService"));
    EXPECT_TRUE(names.count("grpc.health.v1.Health"));
    while (stream->Read(&rresp)) {
    }
    EXPECT_TRUE(stream->Finish().ok());
  }
}

// Container healthchecks run `<service> --health_check=ADDR`: a probe that
// needs no configuration and starts nothing.
TEST(EndToEndTest, HealthCheckModeProbesARunningServiceAndStartsNothing) {
  ServiceSet services;
  services.StartAll();
  const int recovery_port = services.StartRecovery("r1").port;
  const std::string dir = MakeTempDir("outbox_probe");
  const std::pair<const char*, int> targets[] = {{"payment_service", services.payment_port()},
                                                 {"accounting_service", services.accounting_port()},
                                                 {"recovery_service", recovery_port}};
  for (const auto& [binary, port] : targets) {
    Process probe;
    probe.Start(BinaryPath(binary), {"--health_check=127.0.0.1:" + std::to_string(port)},
                {{"AMQP_URL", ""}}, dir + "/" + binary + ".log");
    EXPECT_EQ(probe.WaitExit(absl::Seconds(10)), 0) << probe.Log();
    EXPECT_NE(probe.Log().find("health_check_ok"), std::string::npos) << probe.Log();
  }

  // Nothing listening: exit 1 within the 2 s deadline.
  services.accounting().Terminate();
  Process probe;
  probe.Start(BinaryPath("accounting_service"),
              {"--health_check=127.0.0.1:" + std::to_string(services.accounting_port())},
              {{"AMQP_URL", ""}}, dir + "/down.log");
  EXPECT_EQ(probe.WaitExit(absl::Seconds(10)), 1) << probe.Log();
  EXPECT_NE(probe.Log().find("health_check_failed"), std::string::npos) << probe.Log();
}

TEST(EndToEndTest, BinariesRefuseBadConfigurationWithAClearMessage) {
  Process p;
  const std::string dir = MakeTempDir("outbox_cfg");
  p.Start(BinaryPath("payment_service"), {"--payment_db=" + dir + "/p.db"},
          {{"AMQP_URL", ""}}, dir + "/p.log");
  PollUntil([&] { return !p.Running(); }, absl::Seconds(10));
  EXPECT_FALSE(p.Running());
  EXPECT_NE(p.Log().find("--amqp_url (or AMQP_URL) is required"), std::string::npos) << p.Log();

  Process help;
  help.Start(BinaryPath("accounting_service"), {"--help"}, {}, dir + "/h.log");
  PollUntil([&] { return !help.Running(); }, absl::Seconds(10));
  const std::string text = help.Log();
  for (const char* flag : {"accounting_listen", "accounting_db", "amqp_url", "ACCOUNTING_DB", "AMQP_URL"}) {
    EXPECT_NE(text.find(flag), std::string::npos) << flag << " missing from --help:\n" << text;
  }
}

}  // namespace
}  // namespace outbox::testing
