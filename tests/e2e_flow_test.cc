// End to end on real parts: the real binaries, a real RabbitMQ node, real
// SQLite files (or, as e2e.pg.flow, a real PostgreSQL server), real gRPC
// over loopback sockets.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/channel.h"
#include "google/protobuf/descriptor.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1/reflection.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "shared/observability/internal/http_client.h"
#include "shared/testing/status_matchers.h"
#include "tests/support/alertmanager.h"
#include "tests/support/load.h"
#include "tests/support/queue_sink.h"
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
  ctx.set_deadline(DeadlineIn(absl::Seconds(10)));
  return s.payments().CreatePayment(&ctx, req, resp);
}

// `text` as scraped from /metrics passes `promtool check metrics` (parses,
// and no lint problems: help, suffixes, units). "" when it does, else why.
std::string PromtoolProblems(const std::string& dir, const std::string& name,
                             const std::string& text) {
  const std::string path = absl::StrCat(dir, "/", name, ".prom");
  std::ofstream(path) << text;
  const CommandResult r =
      RunToCompletion("/bin/sh", {"-c", "promtool check metrics < \"$0\"", path},
                      {{"PATH", "/usr/bin:/bin"}}, path + ".promtool");
  return r.exit_code == 0 ? "" : absl::StrCat("exit ", r.exit_code, ": ", r.out, r.err);
}

int CountStatus(const std::vector<::payment::v1::Payment>& payments,
                ::payment::v1::OutboxStatus st) {
  int n = 0;
  for (const auto& p : payments) n += p.outbox().status() == st;
  return n;
}

TEST(EndToEndTest, EveryPaymentReachesSentWithExactlyOneVoucher) {
  const int payment_metrics = FreeLoopbackPort();
  const int accounting_metrics = FreeLoopbackPort();
  const int recovery_metrics = FreeLoopbackPort();
  ServiceSet services(
      Env{{"RECOVERY_BASE_DELAY", "2s"},
          {"PAYMENT_METRICS_LISTEN", absl::StrCat("127.0.0.1:", payment_metrics)},
          {"ACCOUNTING_METRICS_LISTEN", absl::StrCat("127.0.0.1:", accounting_metrics)},
          {"RECOVERY_METRICS_LISTEN", absl::StrCat("127.0.0.1:", recovery_metrics)}});
  services.StartAll();
  constexpr int kThreads = 8;
  constexpr int kEach = 40;
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        CreatePaymentResponse resp;
        grpc::Status s =
            Create(services, Request(absl::StrCat("flow-", t, "-", i), 100 + i), &resp);
        if (!s.ok() || resp.replayed() ||
            resp.payment().outbox().status() != ::payment::v1::SENDING)
          ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0);

  std::vector<::payment::v1::Payment> payments;
  const bool all_sent = PollUntil(
      [&] {
        payments = services.AllPayments();
        return CountStatus(payments, ::payment::v1::SENT) == kThreads * kEach;
      },
      absl::Seconds(60), absl::Milliseconds(250));
  ASSERT_TRUE(all_sent) << "SENT " << CountStatus(payments, ::payment::v1::SENT) << " of "
                        << payments.size();
  ASSERT_EQ(payments.size(), static_cast<size_t>(kThreads * kEach));

  auto vouchers = services.AllVouchers();
  ASSERT_EQ(vouchers.size(), payments.size());
  std::map<std::string, ::accounting::v1::Voucher> by_payment;
  for (const auto& v : vouchers) {
    EXPECT_TRUE(by_payment.emplace(v.payment_id(), v).second)
        << "second voucher for " << v.payment_id();
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
  // outbox_check on the services' stores, files or databases.
  const CheckResult audit = RunChecker(services);
  EXPECT_EQ(audit.exit_code, 0) << audit.output;
  EXPECT_NE(audit.output.find(absl::StrCat("\"vouchers\": ", kThreads * kEach)), std::string::npos)
      << audit.output;
  // GetVoucher and GetPayment agree with the lists.
  grpc::ClientContext ctx;
  ::accounting::v1::GetVoucherRequest gv;
  gv.set_payment_id(payments[0].payment_id());
  ::accounting::v1::Voucher v;
  ASSERT_OK(client::FromGrpc(services.accounting_api().GetVoucher(&ctx, gv, &v), "GetVoucher"));
  EXPECT_EQ(v.voucher_id(), by_payment[payments[0].payment_id()].voucher_id());

  // Prometheus metrics count what happened.
  auto payment_text =
      HttpGet(absl::StrCat("http://127.0.0.1:", payment_metrics, "/metrics"), absl::Seconds(5));
  ASSERT_OK(payment_text);
  EXPECT_NE(
      payment_text->body.find(absl::StrCat("outbox_payments_created_total ", kThreads * kEach)),
      std::string::npos)
      << payment_text->body;
  EXPECT_NE(payment_text->body.find(
                absl::StrCat("outbox_acks_total{result=\"marked_sent\"} ", kThreads * kEach)),
            std::string::npos)
      << payment_text->body;
  auto accounting_text =
      HttpGet(absl::StrCat("http://127.0.0.1:", accounting_metrics, "/metrics"), absl::Seconds(5));
  ASSERT_OK(accounting_text);
  EXPECT_NE(
      accounting_text->body.find(absl::StrCat("outbox_vouchers_created_total ", kThreads * kEach)),
      std::string::npos)
      << accounting_text->body;
  // The latency histograms: every row turned SENT once, each fast-path
  // confirm, each recovery round.
  EXPECT_NE(payment_text->body.find(
                absl::StrCat("\noutbox_create_to_sent_seconds_count ", kThreads * kEach, "\n")),
            std::string::npos)
      << payment_text->body;
  EXPECT_NE(payment_text->body.find("\noutbox_fast_publish_confirm_seconds_bucket{le=\"+Inf\"} "),
            std::string::npos)
      << payment_text->body;
  // recovery_service, started now that every row is SENT (nothing to
  // re-publish), reads them from the payment store and times its rounds.
  services.StartRecovery("r1");
  std::string recovery_text;
  EXPECT_TRUE(PollUntil(
      [&] {
        auto r = HttpGet(absl::StrCat("http://127.0.0.1:", recovery_metrics, "/metrics"),
                         absl::Seconds(5));
        recovery_text = r.ok() ? r->body : "";
        return recovery_text.find("\noutbox_recovery_round_seconds_count ") != std::string::npos &&
               recovery_text.find("\noutbox_recovery_round_seconds_count 0\n") == std::string::npos;
      },
      absl::Seconds(30)))
      << recovery_text;
  EXPECT_NE(
      recovery_text.find(absl::StrCat("\noutbox_rows{status=\"SENT\"} ", kThreads * kEach, "\n")),
      std::string::npos)
      << recovery_text;
  EXPECT_EQ(PromtoolProblems(services.dir(), "payment", payment_text->body), "");
  EXPECT_EQ(PromtoolProblems(services.dir(), "accounting", accounting_text->body), "");
  EXPECT_EQ(PromtoolProblems(services.dir(), "recovery", recovery_text), "");

  // SIGTERM shuts the three down cleanly.
  EXPECT_EQ(services.payment().Terminate(), 0);
  EXPECT_EQ(services.accounting().Terminate(), 0);
  EXPECT_EQ(services.recovery("r1").process.Terminate(), 0);
}

TEST(EndToEndTest, ReplaysConflictsAndInvalidInputWriteNothingNew) {
  ServiceSet services;
  services.StartAll();
  CreatePaymentResponse first;
  ASSERT_OK(client::FromGrpc(Create(services, Request("same-key", 500), &first), "CreatePayment"));
  EXPECT_FALSE(first.replayed());

  CreatePaymentResponse again;
  ASSERT_OK(client::FromGrpc(Create(services, Request("same-key", 500), &again), "CreatePayment"));
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
      {[](auto& r) { r.set_amount_minor(INT64_MAX); }, "amount_minor must be at most"},
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
  EXPECT_EQ(services.payments().GetPayment(&ctx, get, &p).error_code(),
            grpc::StatusCode::NOT_FOUND);

  grpc::ClientContext ctx2;
  ::payment::v1::ListPaymentsRequest list;
  list.set_page_token("garbage");
  ::payment::v1::ListPaymentsResponse lr;
  EXPECT_EQ(services.payments().ListPayments(&ctx2, list, &lr).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(EndToEndTest, OneTraceIdFollowsAPaymentThroughTheThreeServices) {
  const std::string trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
  ServiceSet services(Env{{"OUTBOX_LOG_LEVEL", "debug"},
                          {"RECOVERY_BASE_DELAY", "300ms"},
                          {"RECOVERY_IDLE_SLEEP", "100ms"}});
  services.StartPayment();
  auto& recovery = services.StartRecovery("r");
  CreatePaymentResponse traced, fresh;
  {
    // The first copy is lost by a consumer that acks and forgets, so the
    // story includes a re-publish by recovery.
    QueueSink sink(services.broker().amqp_url, services.pay_queue(), QueueSink::Mode::kDrop);
    grpc::ClientContext ctx;
    ctx.AddMetadata("traceparent", "00-" + trace_id + "-00f067aa0ba902b7-01");
    ASSERT_OK(
        client::FromGrpc(services.payments().CreatePayment(&ctx, Request("trace-1", 4242), &traced),
                         "CreatePayment"));
    const auto& md = ctx.GetServerInitialMetadata();
    auto back = md.find("traceparent");
    ASSERT_NE(back, md.end());
    EXPECT_EQ(std::string(back->second.data(), back->second.size()).substr(0, 36),
              "00-" + trace_id + "-");
    ASSERT_OK(client::FromGrpc(Create(services, Request("trace-2", 4343), &fresh),
                               "CreatePayment"));  // no traceparent sent
    ASSERT_TRUE(PollUntil(
        [&] {
          return recovery.process.Log().find("message_republished payment_id=" +
                                             traced.payment().payment_id()) != std::string::npos;
        },
        absl::Seconds(20)));
  }
  services.StartAccounting();
  ASSERT_TRUE(
      PollUntil([&] { return CountStatus(services.AllPayments(), ::payment::v1::SENT) == 2; },
                absl::Seconds(30)));

  const std::string& payment_id = traced.payment().payment_id();
  const std::string& message_id = traced.payment().outbox().message_id();
  EXPECT_EQ(traced.payment().outbox().trace_id(), trace_id);
  ASSERT_EQ(fresh.payment().outbox().trace_id().size(), 32u);  // a new trace was started
  EXPECT_NE(fresh.payment().outbox().trace_id(), trace_id);
  grpc::ClientContext get_ctx;
  ::ops::v1::GetMessageRequest get;
  get.set_message_id(message_id);
  ::ops::v1::OutboxMessage row;
  ASSERT_OK(client::FromGrpc(recovery.ops->GetMessage(&get_ctx, get, &row), "GetMessage"));
  EXPECT_EQ(row.trace_id(), trace_id);
  EXPECT_EQ(row.traceparent().substr(0, 36), "00-" + trace_id + "-");
  grpc::ClientContext v_ctx;
  ::accounting::v1::GetVoucherRequest vreq;
  vreq.set_payment_id(payment_id);
  ::accounting::v1::Voucher voucher;
  ASSERT_OK(
      client::FromGrpc(services.accounting_api().GetVoucher(&v_ctx, vreq, &voucher), "GetVoucher"));
  EXPECT_EQ(voucher.trace_id(), trace_id);

  // One grep over the three logs tells the story: created, re-published,
  // booked, acknowledged, each line with payment id, message id and trace id.
  const std::string ids =
      "payment_id=" + payment_id + " message_id=" + message_id + " trace_id=" + trace_id;
  EXPECT_NE(services.payment().Log().find("payment_created " + ids), std::string::npos);
  EXPECT_NE(recovery.process.Log().find("message_republished " + ids), std::string::npos);
  EXPECT_NE(services.accounting().Log().find(" " + ids), std::string::npos);
  EXPECT_NE(services.accounting().Log().find("voucher_booked " + ids), std::string::npos)
      << services.accounting().Log();
  EXPECT_NE(services.payment().Log().find("ack_received " + ids), std::string::npos);
}

// Lists the services through reflection (v1 or v1alpha: the same messages in
// two packages) and resolves each to the file that declares it.
template <typename Reflection, typename Request, typename Response>
std::set<std::string> ListAndResolveServices(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = Reflection::NewStub(channel);
  grpc::ClientContext ctx;
  auto stream = stub->ServerReflectionInfo(&ctx);
  Request list;
  list.set_list_services("");
  EXPECT_TRUE(stream->Write(list));
  Response resp;
  EXPECT_TRUE(stream->Read(&resp));
  std::set<std::string> names;
  for (const auto& svc : resp.list_services_response().service()) names.insert(svc.name());
  for (const std::string& name : names) {
    Request lookup;
    lookup.set_file_containing_symbol(name);
    EXPECT_TRUE(stream->Write(lookup));
    EXPECT_TRUE(stream->Read(&resp));
    EXPECT_FALSE(resp.has_error_response())
        << name << ": " << resp.error_response().error_message();
    bool declared = false;
    std::set<std::string> files;
    for (const std::string& bytes : resp.file_descriptor_response().file_descriptor_proto()) {
      google::protobuf::FileDescriptorProto file;
      EXPECT_TRUE(file.ParseFromString(bytes));
      files.insert(file.name());
      for (const auto& s : file.service()) declared |= file.package() + "." + s.name() == name;
    }
    EXPECT_TRUE(declared) << name << " not declared in what reflection returned";
    // A file comes with what it imports, so a client can build the types.
    if (name == "payment.v1.PaymentService") {
      EXPECT_TRUE(files.count("google/protobuf/timestamp.proto")) << name;
    }
  }
  stream->WritesDone();
  EXPECT_OK(client::FromGrpc(stream->Finish(), "Finish"));
  return names;
}

TEST(EndToEndTest, HealthAndReflectionAnswerOnEveryService) {
  ServiceSet services;
  services.StartAll();
  auto& recovery = services.StartRecovery("r1");
  const std::vector<std::pair<std::string, std::shared_ptr<grpc::Channel>>> servers = {
      {"payment.v1.PaymentService", services.payment_channel()},
      {"accounting.v1.AccountingService", services.accounting_channel()},
      {"ops.v1.OutboxOps", grpc::CreateChannel(absl::StrCat("127.0.0.1:", recovery.port),
                                               grpc::InsecureChannelCredentials())}};
  for (const auto& [own, channel] : servers) {
    auto health = grpc::health::v1::Health::NewStub(channel);
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    ASSERT_OK(client::FromGrpc(health->Check(&ctx, req, &resp), "Check"));
    EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING);

    namespace v1 = grpc::reflection::v1;
    namespace v1alpha = grpc::reflection::v1alpha;
    const std::set<std::string> listed_v1 =
        ListAndResolveServices<v1::ServerReflection, v1::ServerReflectionRequest,
                               v1::ServerReflectionResponse>(channel);
    const std::set<std::string> listed_v1alpha =
        ListAndResolveServices<v1alpha::ServerReflection, v1alpha::ServerReflectionRequest,
                               v1alpha::ServerReflectionResponse>(channel);
    EXPECT_EQ(listed_v1, listed_v1alpha);
    for (const std::string& name : {own, std::string("grpc.health.v1.Health"),
                                    std::string("grpc.reflection.v1.ServerReflection"),
                                    std::string("grpc.reflection.v1alpha.ServerReflection")}) {
      EXPECT_TRUE(listed_v1.count(name)) << own << " does not list " << name;
    }
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
          {{"AMQP_URL", ""}, {"PAYMENT_LISTEN", "127.0.0.1:0"}}, dir + "/p.log");
  PollUntil([&] { return !p.Running(); }, absl::Seconds(10));
  EXPECT_FALSE(p.Running());
  EXPECT_NE(p.Log().find("--amqp_url (or AMQP_URL) is required"), std::string::npos) << p.Log();

  Process help;
  help.Start(BinaryPath("accounting_service"), {"--help"}, {}, dir + "/h.log");
  ASSERT_EQ(help.WaitExit(absl::Seconds(10)), 0);
  const std::string text = help.Log();
  EXPECT_EQ(text.rfind("usage: accounting_service [flags]\n", 0), 0u) << text;
  EXPECT_EQ(text.find("accounting_service", 10), std::string::npos) << "name printed twice:\n"
                                                                    << text;
  for (const char* flag :
       {"accounting_listen", "accounting_db", "amqp_url", "ACCOUNTING_DB", "AMQP_URL"}) {
    EXPECT_NE(text.find(flag), std::string::npos) << flag << " missing from --help:\n" << text;
  }

  Process version;
  version.Start(BinaryPath("recovery_service"), {"--version"}, {}, dir + "/v.log");
  ASSERT_EQ(version.WaitExit(absl::Seconds(10)), 0);
  EXPECT_EQ(version.Log().rfind("recovery_service ", 0), 0u) << version.Log();
  EXPECT_NE(version.Log().find(" build)"), std::string::npos) << version.Log();
  EXPECT_EQ(version.Log().find("NDEBUG"), std::string::npos) << version.Log();

  // Start-up errors: exit 2 and one line naming the flag, before any broker
  // connection is tried and without gRPC's own log format.
  std::ofstream(dir + "/keys") << "k1 0123456789abcdef0123456789abcdef\n";
  std::filesystem::permissions(dir + "/keys", std::filesystem::perms::owner_read);
  const Env base = {{"AMQP_URL", "amqp://u:p@127.0.0.1:1/%2F"},
                    {"PAYMENT_DB", dir + "/p.db"},
                    {"MESSAGE_KEYS_FILE", dir + "/keys"}};
  int n = 0;
  for (const Env& bad : std::vector<Env>{{{"PAYMENT_LISTEN", "10.255.255.1:5"}},
                                         {{"PAYMENT_LISTEN", "garbage"}},
                                         {{"PAYMENT_LISTEN", "no-such-host.invalid:5"}},
                                         {{"PAYMENT_METRICS_LISTEN", "10.255.255.1:5"}}}) {
    Env env = base;
    for (const auto& [k, v] : bad) env[k] = v;
    Process start;
    start.Start(BinaryPath("payment_service"), {}, env, absl::StrCat(dir, "/bad", n++, ".log"));
    EXPECT_EQ(start.WaitExit(absl::Seconds(10)), 2) << start.Log();
    const std::string log = start.Log();
    EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
    EXPECT_NE(log.find("payment_service_failed"), std::string::npos) << log;
    EXPECT_NE(log.find("listen"), std::string::npos) << log;
  }
  Process unknown;
  unknown.Start(BinaryPath("payment_service"), {"--no_such_flag=1"}, base, dir + "/u.log");
  EXPECT_EQ(unknown.WaitExit(absl::Seconds(10)), 2);
  EXPECT_EQ(unknown.Log().rfind("payment_service: unknown flag --no_such_flag\n", 0), 0u)
      << unknown.Log();
}

}  // namespace
}  // namespace outbox::testing
