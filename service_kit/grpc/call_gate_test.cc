// The call gate on a real server over loopback: a service whose handlers
// check nothing is refused without the token, with the codes the token
// check gives, and its handlers never run; health stays open.
#include "service_kit/grpc/call_gate.h"

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "payment/v1/payment.grpc.pb.h"
#include "service_kit/grpc/grpc_server.h"
#include "shared/observability/log.h"

namespace outbox {
namespace {

constexpr char kToken[] = "gate-test-token-0123456789";

// Every method answers OK and counts that it ran; none asks for a token.
// CreatePayment is a callback method, the reads are sync: the gate's two
// kinds.
class UncheckedPayments final
    : public ::payment::v1::PaymentService::WithCallbackMethod_CreatePayment<
          ::payment::v1::PaymentService::Service> {
 public:
  grpc::ServerUnaryReactor* CreatePayment(grpc::CallbackServerContext* context,
                                          const ::payment::v1::CreatePaymentRequest*,
                                          ::payment::v1::CreatePaymentResponse*) override {
    ++ran;
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  grpc::Status GetPayment(grpc::ServerContext*, const ::payment::v1::GetPaymentRequest*,
                          ::payment::v1::Payment*) override {
    ++ran;
    return grpc::Status::OK;
  }
  grpc::Status ListPayments(grpc::ServerContext*, const ::payment::v1::ListPaymentsRequest*,
                            ::payment::v1::ListPaymentsResponse*) override {
    ++ran;
    return grpc::Status::OK;
  }
  std::atomic<int> ran{0};
};

class CallGateTest : public ::testing::Test {
 protected:
  void Start(std::vector<ServedService> services) {
    auto server = StartGrpcServer("127.0.0.1:0", services, &port_);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
    channel_ =
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials());
    stub_ = ::payment::v1::PaymentService::NewStub(channel_);
  }
  void TearDown() override {
    if (server_ != nullptr) ShutdownGrpcServer(*server_);
  }

  // The three methods' statuses, called with `token` ("" = none).
  std::vector<grpc::Status> CallAll(const std::string& token) {
    std::vector<grpc::Status> statuses;
    for (int method = 0; method < 3; ++method) {
      grpc::ClientContext context;
      if (!token.empty()) context.AddMetadata("authorization", absl::StrCat("Bearer ", token));
      if (method == 0) {
        ::payment::v1::CreatePaymentRequest req;
        req.set_idempotency_key("k-1");
        ::payment::v1::CreatePaymentResponse resp;
        statuses.push_back(stub_->CreatePayment(&context, req, &resp));
      } else if (method == 1) {
        ::payment::v1::GetPaymentRequest req;
        req.set_payment_id("a-payment-id-long-enough-to-leave-the-small-string-buffer");
        ::payment::v1::Payment resp;
        statuses.push_back(stub_->GetPayment(&context, req, &resp));
      } else {
        ::payment::v1::ListPaymentsRequest req;
        ::payment::v1::ListPaymentsResponse resp;
        statuses.push_back(stub_->ListPayments(&context, req, &resp));
      }
    }
    return statuses;
  }

  UncheckedPayments service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<::payment::v1::PaymentService::Stub> stub_;
};

TEST_F(CallGateTest, AMethodWithoutACheckIsRefusedWithoutTheToken) {
  Start({{&service_, BearerTokenCheck(kToken)}});
  for (const grpc::Status& s : CallAll("")) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
    EXPECT_EQ(s.error_message(), "missing 'authorization: Bearer <token>' metadata");
  }
  EXPECT_EQ(service_.ran.load(), 0);
}

TEST_F(CallGateTest, AWrongTokenIsDeniedAndTheRightOnePasses) {
  Start({{&service_, BearerTokenCheck(kToken)}});
  for (const grpc::Status& s : CallAll("some-other-token-0123456789")) {
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  }
  EXPECT_EQ(service_.ran.load(), 0);
  for (const grpc::Status& s : CallAll(kToken)) EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(service_.ran.load(), 3);
}

TEST_F(CallGateTest, EachRefusalIsLoggedWithItsMethodAndCode) {
  absl::Mutex mu;
  std::vector<std::string> lines;
  SetLogSink([&](const LogRecord& r) {
    if (r.event != "call_refused") return;
    absl::MutexLock lock(&mu);
    lines.emplace_back(r.line);
  });
  Start({{&service_, BearerTokenCheck(kToken)}});
  CallAll("");
  SetLogSink(nullptr);
  absl::MutexLock lock(&mu);
  ASSERT_EQ(lines.size(), 3u);
  for (const char* method :
       {"/payment.v1.PaymentService/CreatePayment", "/payment.v1.PaymentService/GetPayment",
        "/payment.v1.PaymentService/ListPayments"}) {
    bool found = false;
    for (const std::string& line : lines) {
      found = found || (line.find(absl::StrCat("method=", method)) != std::string::npos &&
                        line.find("code=UNAUTHENTICATED") != std::string::npos);
    }
    EXPECT_TRUE(found) << method;
  }
}

// A caller refused again and again does not write a line per call: one per
// method a minute (RefusedCallLog), however many calls and connections.
TEST_F(CallGateTest, ACallerRefusedAgainAndAgainWritesOneLineAMinutePerMethod) {
  absl::Mutex mu;
  int lines = 0;
  SetLogSink([&](const LogRecord& r) {
    if (r.event != "call_refused") return;
    absl::MutexLock lock(&mu);
    ++lines;
  });
  Start({{&service_, BearerTokenCheck(kToken)}});
  const absl::Time start = absl::Now();
  int refused = 0;
  for (int round = 0; round < 50; ++round) {
    for (const grpc::Status& s : CallAll("")) {
      refused += s.error_code() == grpc::StatusCode::UNAUTHENTICATED ? 1 : 0;
    }
  }
  const int64_t minutes = absl::ToInt64Minutes(absl::Now() - start);
  SetLogSink(nullptr);
  absl::MutexLock lock(&mu);
  EXPECT_EQ(refused, 150);
  EXPECT_GE(lines, 3);
  EXPECT_LE(lines, 3 * (1 + minutes));
}

TEST_F(CallGateTest, HealthAndServicesWithoutATokenStayOpen) {
  Start({&service_});
  for (const grpc::Status& s : CallAll("")) EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(service_.ran.load(), 3);
}

TEST_F(CallGateTest, HealthStaysOpenBesideAProtectedService) {
  Start({{&service_, BearerTokenCheck(kToken)}});
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest req;
  grpc::health::v1::HealthCheckResponse resp;
  grpc::Status s = health->Check(&context, req, &resp);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

}  // namespace
}  // namespace outbox
