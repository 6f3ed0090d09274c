// The broker goes away under load and comes back: both services stay up,
// CreatePayment keeps succeeding, nothing committed is lost, and payments
// made after the restart reach SENT.
#include <gtest/gtest.h>

#include <set>

#include "absl/strings/str_cat.h"
#include "client/channel.h"
#include "shared/testing/status_matchers.h"
#include "tests/support/services.h"

namespace outbox::testing {
namespace {

std::string CreateOne(ServiceSet& s, const std::string& key) {
  ::payment::v1::CreatePaymentRequest r;
  r.set_idempotency_key(key);
  r.set_payer_account("payer");
  r.set_payee_account("payee");
  r.set_amount_minor(4200);
  r.set_currency("USD");
  ::payment::v1::CreatePaymentResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(absl::Seconds(10)));
  grpc::Status st = s.payments().CreatePayment(&ctx, r, &resp);
  EXPECT_OK(client::FromGrpc(st, key));
  return resp.payment().payment_id();
}

TEST(BrokerRestartTest, ServicesSurviveAndNothingIsLost) {
  ServiceSet services(Env{{"RECOVERY_BASE_DELAY", "1s"}});
  services.StartAll();
  std::vector<std::string> before, during, after;
  for (int i = 0; i < 100; ++i) before.push_back(CreateOne(services, absl::StrCat("before-", i)));

  StopBroker(services.broker());
  for (int i = 0; i < 50; ++i) during.push_back(CreateOne(services, absl::StrCat("during-", i)));
  ASSERT_TRUE(services.payment().Running());
  ASSERT_TRUE(services.accounting().Running());
  StartBroker(services.broker());

  for (int i = 0; i < 100; ++i) after.push_back(CreateOne(services, absl::StrCat("after-", i)));

  std::map<std::string, ::payment::v1::Payment> by_id;
  auto sent = [&](const std::vector<std::string>& ids) {
    int n = 0;
    for (const auto& id : ids)
      n += by_id.count(id) && by_id[id].outbox().status() == ::payment::v1::SENT;
    return n;
  };
  const bool done = PollUntil(
      [&] {
        by_id.clear();
        for (auto& p : services.AllPayments()) by_id[p.payment_id()] = p;
        return sent(after) == static_cast<int>(after.size()) &&
               sent(during) == static_cast<int>(during.size());
      },
      absl::Seconds(90), absl::Milliseconds(500));
  std::cout << "after broker restart: SENT before=" << sent(before) << "/" << before.size()
            << " during=" << sent(during) << "/" << during.size() << " after=" << sent(after) << "/"
            << after.size() << "\n";
  EXPECT_TRUE(done);
  ASSERT_EQ(by_id.size(), before.size() + during.size() + after.size());
  for (const auto& [id, p] : by_id) {
    EXPECT_NE(p.outbox().status(), ::payment::v1::FAILED) << id;
  }
  // Every SENT row has exactly one voucher and no voucher is duplicated.
  std::set<std::string> vouchered;
  for (const auto& v : services.AllVouchers()) {
    EXPECT_TRUE(vouchered.insert(v.payment_id()).second) << "duplicate voucher " << v.payment_id();
  }
  for (const auto& [id, p] : by_id) {
    if (p.outbox().status() == ::payment::v1::SENT) EXPECT_TRUE(vouchered.count(id)) << id;
  }
  EXPECT_EQ(services.payment().Terminate(), 0);
  EXPECT_EQ(services.accounting().Terminate(), 0);
}

}  // namespace
}  // namespace outbox::testing
