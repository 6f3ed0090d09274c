#include "tools/outboxctl/run.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include "accounting/v1/accounting_mock.grpc.pb.h"
#include "grpc/health/v1/health_mock.grpc.pb.h"
#include "ops/v1/ops_mock.grpc.pb.h"
#include "payment/v1/payment_mock.grpc.pb.h"

namespace outbox::ctl {
namespace {

using ::testing::_;
using ::testing::DoAll;
using ::testing::HasSubstr;
using ::testing::Invoke;
using ::testing::Return;
using ::testing::SetArgPointee;

// Hands out the mocks a test prepared, and remembers the addresses asked for.
class MockConnections final : public Connections {
 public:
  std::unique_ptr<::ops::v1::MockOutboxOpsStub> ops =
      std::make_unique<::ops::v1::MockOutboxOpsStub>();
  std::unique_ptr<::grpc::health::v1::MockHealthStub> health =
      std::make_unique<::grpc::health::v1::MockHealthStub>();
  std::vector<std::string> addrs;

  std::unique_ptr<OpsStub> Ops(const std::string& addr) override {
    addrs.push_back(addr);
    return std::move(ops);
  }
  std::unique_ptr<::payment::v1::PaymentService::StubInterface> Payments(
      const std::string& addr) override {
    addrs.push_back(addr);
    return std::make_unique<::payment::v1::MockPaymentServiceStub>();
  }
  std::unique_ptr<::accounting::v1::AccountingService::StubInterface> Accounting(
      const std::string& addr) override {
    addrs.push_back(addr);
    return std::make_unique<::accounting::v1::MockAccountingServiceStub>();
  }
  std::unique_ptr<::grpc::health::v1::Health::StubInterface> Health(
      const std::string& addr) override {
    addrs.push_back(addr);
    return std::move(health);
  }
};

struct Outcome {
  int code;
  std::string out, err;
};

Outcome RunCtl(MockConnections& connections, std::vector<std::string> args) {
  std::ostringstream out, err;
  const int code = RunCommandLine(args, connections, out, err);
  return {code, out.str(), err.str()};
}

::ops::v1::ListMessagesResponse Page(std::vector<std::string> ids, std::string next) {
  ::ops::v1::ListMessagesResponse page;
  for (const auto& id : ids) {
    auto* m = page.add_messages();
    m->set_message_id(id);
    m->set_status(::ops::v1::FAILED);
  }
  page.set_next_page_token(next);
  return page;
}

TEST(RunTest, AFailedCallIsOneLineNamingTheStatusAndExit1) {
  MockConnections c;
  EXPECT_CALL(*c.ops, GetMessage(_, _, _))
      .WillOnce(Return(grpc::Status(grpc::StatusCode::NOT_FOUND, "no message 'm'")));
  const Outcome o = RunCtl(c, {"--recovery_addr=h:1", "get", "m"});
  EXPECT_EQ(o.code, 1);
  EXPECT_EQ(o.out, "");
  EXPECT_EQ(o.err, "outboxctl: NOT_FOUND: no message 'm' (recovery_service at h:1)\n");
  EXPECT_EQ(c.addrs, std::vector<std::string>{"h:1"});
}

TEST(RunTest, ListPagesThroughUntilTheLastPage) {
  MockConnections c;
  std::vector<::ops::v1::ListMessagesRequest> asked;
  EXPECT_CALL(*c.ops, ListMessages(_, _, _))
      .WillOnce(DoAll(Invoke([&](auto*, const auto& r, auto*) { asked.push_back(r); }),
                      SetArgPointee<2>(Page({"a", "b"}, "t1")), Return(grpc::Status::OK)))
      .WillOnce(DoAll(Invoke([&](auto*, const auto& r, auto*) { asked.push_back(r); }),
                      SetArgPointee<2>(Page({"c"}, "")), Return(grpc::Status::OK)));
  const Outcome o = RunCtl(c, {"list", "--status=FAILED", "--page_size=2"});
  EXPECT_EQ(o.code, 0) << o.err;
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_EQ(asked[0].status(), ::ops::v1::FAILED);
  EXPECT_EQ(asked[0].page_size(), 2);
  EXPECT_EQ(asked[0].page_token(), "");
  EXPECT_EQ(asked[1].page_token(), "t1");
  EXPECT_THAT(o.out, HasSubstr("\nc "));
  EXPECT_THAT(o.out, HasSubstr("3 FAILED row(s)\n"));
}

TEST(RunTest, ListStopsAtTheLimitAndSaysMoreRemain) {
  MockConnections c;
  std::vector<int> sizes;
  EXPECT_CALL(*c.ops, ListMessages(_, _, _))
      .WillOnce(DoAll(Invoke([&](auto*, const auto& r, auto*) { sizes.push_back(r.page_size()); }),
                      SetArgPointee<2>(Page({"a", "b"}, "t1")), Return(grpc::Status::OK)))
      .WillOnce(DoAll(Invoke([&](auto*, const auto& r, auto*) { sizes.push_back(r.page_size()); }),
                      SetArgPointee<2>(Page({"c"}, "t2")), Return(grpc::Status::OK)));
  const Outcome o = RunCtl(c, {"list", "--status=FAILED", "--limit=3", "--page_size=2", "--json"});
  EXPECT_EQ(o.code, 0) << o.err;
  EXPECT_EQ(sizes, (std::vector<int>{2, 1}));
  EXPECT_THAT(o.out, HasSubstr("\"next_page_token\":\"t2\""));
  EXPECT_THAT(o.out, HasSubstr("\"message_id\":\"c\""));
}

TEST(RunTest, HealthExitsZeroOnlyWhenServing) {
  for (auto [status, code] : {std::pair{::grpc::health::v1::HealthCheckResponse::SERVING, 0},
                              std::pair{::grpc::health::v1::HealthCheckResponse::NOT_SERVING, 1}}) {
    MockConnections c;
    ::grpc::health::v1::HealthCheckResponse resp;
    resp.set_status(status);
    EXPECT_CALL(*c.health, Check(_, _, _))
        .WillOnce(DoAll(SetArgPointee<2>(resp), Return(grpc::Status::OK)));
    const Outcome o = RunCtl(c, {"health", "h:9"});
    EXPECT_EQ(o.code, code) << o.out;
    EXPECT_EQ(o.out,
              "h:9  " + ::grpc::health::v1::HealthCheckResponse::ServingStatus_Name(status) + "\n");
  }
  MockConnections down;
  EXPECT_CALL(*down.health, Check(_, _, _))
      .WillOnce(Return(grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection refused")));
  const Outcome o = RunCtl(down, {"health", "h:9"});
  EXPECT_EQ(o.code, 1);
  EXPECT_EQ(o.err, "outboxctl: UNAVAILABLE: connection refused (health check at h:9)\n");
}

TEST(RunTest, UsageErrorsExit2WithTheUsageLine) {
  MockConnections c;
  const Outcome o = RunCtl(c, {"frobnicate"});
  EXPECT_EQ(o.code, 2);
  EXPECT_EQ(o.err,
            "outboxctl: unknown command 'frobnicate'\n"
            "usage: outboxctl [flags] <command> [args] (--help lists the commands)\n");
  EXPECT_TRUE(c.addrs.empty()) << "no call is made";
  const Outcome help = RunCtl(c, {"--help"});
  EXPECT_EQ(help.code, 0);
  EXPECT_EQ(help.out.rfind("usage: outboxctl", 0), 0u);
  const Outcome version = RunCtl(c, {"--version"});
  EXPECT_EQ(version.code, 0);
  EXPECT_THAT(version.out, ::testing::StartsWith("outboxctl "));
}

}  // namespace
}  // namespace outbox::ctl
