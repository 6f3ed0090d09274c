// Nothing starts wrong: services started at the same moment on one payment.db
// all come up; a port in use stops the newcomer with exit 2, never the one
// serving; recovery_service waits for payment_service's schema and never
// creates the file. The real binaries, started by hand so that several start
// at once.
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/channel.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "shared/testing/status_matchers.h"
#include "tests/support/alertmanager.h"
#include "tests/support/services.h"

namespace outbox::testing {
namespace {

// One binary started by hand, with the event its start-up logs.
struct Launched {
  std::string name;
  std::unique_ptr<Process> process = std::make_unique<Process>();

  std::string started_event() const { return absl::StrCat(name, "_started"); }
  bool Started() const { return process->Log().find(started_event()) != std::string::npos; }
  int Port() const {
    int port = 0;
    return absl::SimpleAtoi(LogField(process->Log(), started_event(), "port"), &port) ? port : 0;
  }
};

Launched Launch(const std::string& name, const Env& env, const std::string& log_path) {
  Launched l{name};
  l.process->Start(BinaryPath(name), {}, env, log_path);
  return l;
}

// SERVING on a fresh channel (closed on return: an idle client connection
// would hold the server's shutdown for its grace period).
bool Serving(int port) {
  auto channel =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(absl::Seconds(5)));
  grpc::health::v1::HealthCheckRequest req;
  grpc::health::v1::HealthCheckResponse resp;
  return health->Check(&ctx, req, &resp).ok() &&
         resp.status() == grpc::health::v1::HealthCheckResponse::SERVING;
}

// Every round starts one payment_service and two recovery_services at the
// same moment on one file: a new file in even rounds, the previous round's
// (existing) file in odd ones; the order of the spawns alternates too.
TEST(StartupTest, PaymentAndRecoveriesStartedTogetherAllComeUp) {
  constexpr int kRounds = 20;
  ServiceSet services;  // the broker, queues and a temp dir; it starts nothing here
  for (int round = 0; round < kRounds; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    Env env = services.ServiceEnv();
    env["PAYMENT_DB"] = absl::StrCat(services.dir(), "/payment", round / 2, ".db");
    env["PAYMENT_LISTEN"] = "127.0.0.1:0";
    env["RECOVERY_LISTEN"] = "127.0.0.1:0";
    const std::string logs = absl::StrCat(services.dir(), "/round", round, "_");
    std::vector<std::string> names = {"payment_service", "recovery_service", "recovery_service"};
    if (round % 4 >= 2) std::swap(names[0], names[2]);  // recovery first
    std::vector<Launched> launched;
    for (size_t i = 0; i < names.size(); ++i) {
      env["RECOVERY_INSTANCE_ID"] = absl::StrCat("r", round, "-", i);
      launched.push_back(Launch(names[i], env, absl::StrCat(logs, i, "_", names[i], ".log")));
    }
    for (Launched& l : launched) {
      const bool up = PollUntil([&] { return l.Started() || !l.process->Running(); },
                                absl::Seconds(30), absl::Milliseconds(20)) &&
                      l.Started();
      EXPECT_TRUE(up) << l.name << " did not start; log:\n" << l.process->Log();
      if (up) EXPECT_TRUE(Serving(l.Port())) << l.name;
    }
    for (Launched& l : launched) {
      EXPECT_EQ(l.process->Terminate(), 0) << l.name << " log:\n" << l.process->Log();
    }
    if (HasFailure()) break;  // one failed round tells the story
  }
}

TEST(StartupTest, ASecondPaymentServiceOnAPortInUseExitsTwoAndTheFirstKeepsServing) {
  const int metrics_port = FreeLoopbackPort();
  ServiceSet services(Env{{"PAYMENT_METRICS_LISTEN", absl::StrCat("127.0.0.1:", metrics_port)}});
  services.StartPayment();
  const int port = std::stoi(LogField(services.payment().Log(), "payment_service_started", "port"));

  // The same gRPC port (with its own file, as a stranger's copy would have).
  Env env = services.ServiceEnv();
  env["PAYMENT_LISTEN"] = absl::StrCat("127.0.0.1:", port);
  env["PAYMENT_METRICS_LISTEN"] = "";
  env["PAYMENT_DB"] = services.dir() + "/second.db";
  Launched second = Launch("payment_service", env, services.dir() + "/second.log");
  EXPECT_EQ(second.process->WaitExit(absl::Seconds(30)), 2) << second.process->Log();
  // Caught by the start-up check of the address (before anything opens); the
  // server's own bind would refuse it too (no SO_REUSEPORT: GrpcServerTest).
  EXPECT_NE(second.process->Log().find(absl::StrCat(
                "payment_service_failed error=\"INVALID_ARGUMENT: --payment_listen '127.0.0.1:",
                port, "': cannot listen there: Address already in use\"")),
            std::string::npos)
      << second.process->Log();
  EXPECT_EQ(second.process->Log().find("amqp_connected"), std::string::npos)
      << "it exited before touching the broker";

  // The same metrics port, a free gRPC one.
  env["PAYMENT_LISTEN"] = "127.0.0.1:0";
  env["PAYMENT_METRICS_LISTEN"] = absl::StrCat("127.0.0.1:", metrics_port);
  Launched third = Launch("payment_service", env, services.dir() + "/third.log");
  EXPECT_EQ(third.process->WaitExit(absl::Seconds(30)), 2) << third.process->Log();
  EXPECT_NE(
      third.process->Log().find(absl::StrCat("--metrics_listen '127.0.0.1:", metrics_port,
                                             "': cannot listen there: Address already in use")),
      std::string::npos)
      << third.process->Log();

  // The first answers every new connection (with a shared port the kernel
  // would have sent some of them to the second process).
  EXPECT_TRUE(services.payment().Running());
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(Serving(port)) << "connection " << i;
  ::payment::v1::CreatePaymentRequest req;
  req.set_idempotency_key("startup-1");
  req.set_payer_account("acct-alice");
  req.set_payee_account("acct-bob");
  req.set_amount_minor(100);
  req.set_currency("EUR");
  ::payment::v1::CreatePaymentResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(absl::Seconds(10)));
  EXPECT_OK(client::FromGrpc(services.payments().CreatePayment(&ctx, req, &resp), "CreatePayment"));
}

TEST(StartupTest, RecoveryNeverCreatesAMissingPaymentDbAndGivesUpWithExitTwo) {
  ServiceSet services;
  Env env = services.ServiceEnv();
  const std::string missing = services.dir() + "/wrong/payment.db";
  env["PAYMENT_DB"] = missing;
  env["PAYMENT_DB_WAIT"] = "1s";
  env["RECOVERY_LISTEN"] = "127.0.0.1:0";
  Launched recovery = Launch("recovery_service", env, services.dir() + "/recovery.log");
  EXPECT_EQ(recovery.process->WaitExit(absl::Seconds(30)), 2) << recovery.process->Log();
  const std::string log = recovery.process->Log();
  EXPECT_NE(log.find(absl::StrCat("waiting_for_payment_db path=", missing)), std::string::npos)
      << log;
  EXPECT_NE(log.find(absl::StrCat("payment database ", missing,
                                  " does not exist after 1s; is PAYMENT_DB right?")),
            std::string::npos)
      << log;
  EXPECT_FALSE(std::filesystem::exists(missing));
  EXPECT_FALSE(std::filesystem::exists(services.dir() + "/wrong"));
}

TEST(StartupTest, RecoveryStartedBeforePaymentWaitsThenComesUp) {
  ServiceSet services;
  const std::string db = services.dir() + "/payment.db";
  Env env = services.ServiceEnv();
  env["RECOVERY_LISTEN"] = "127.0.0.1:0";
  Launched recovery = Launch("recovery_service", env, services.dir() + "/recovery_first.log");
  ASSERT_NE(recovery.process->WaitForLog("waiting_for_payment_db", absl::Seconds(10)), "")
      << recovery.process->Log();
  EXPECT_FALSE(std::filesystem::exists(db)) << "recovery created the payment database";
  EXPECT_FALSE(recovery.Started());

  services.StartPayment();
  EXPECT_NE(recovery.process->WaitForLog("recovery_service_started", absl::Seconds(10)), "")
      << recovery.process->Log();
  EXPECT_TRUE(Serving(recovery.Port()));
  EXPECT_EQ(recovery.process->Terminate(), 0) << recovery.process->Log();
}

}  // namespace
}  // namespace outbox::testing
