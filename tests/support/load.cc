#include "tests/support/load.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/channel.h"
#include "client/listing.h"
#include "client/request.h"
#include "service_kit/shard_of_payment.h"
#include "shared/testing/status_matchers.h"

namespace outbox::testing {
namespace {

// A crashed or restarting service fails calls for a while: the same key is
// tried again every 100 ms, for up to 3 minutes per payment.
client::LoadPlan Plan(std::string key_prefix, int total, absl::Duration pause) {
  client::LoadPlan plan;
  plan.key_prefix = std::move(key_prefix);
  plan.description = "load";
  plan.count = total;
  plan.pause = pause;
  plan.retry.max_attempts = 0;
  plan.retry.retry_for = Scaled(absl::Minutes(3));
  plan.retry.retry_unknown = true;
  plan.retry.first_backoff = plan.retry.max_backoff = absl::Milliseconds(100);
  plan.retry.call_timeout = Scaled(absl::Seconds(5));
  return plan;
}

// One stub per thread, all on the services' channel (it follows restarts).
std::vector<std::unique_ptr<::payment::v1::PaymentService::StubInterface>> Stubs(
    ServiceSet& services, int threads) {
  std::vector<std::unique_ptr<::payment::v1::PaymentService::StubInterface>> stubs;
  for (int t = 0; t < threads; ++t) {
    if (services.payment_shard_count() > 0) {
      stubs.push_back(services.PaymentShardsStub());  // by the key's shard
    } else {
      stubs.push_back(::payment::v1::PaymentService::NewStub(services.payment_channel()));
    }
  }
  return stubs;
}

}  // namespace

PaymentLoad::PaymentLoad(ServiceSet& services, std::string key_prefix, int total, int threads,
                         absl::Duration pause)
    : load_(Stubs(services, threads), Plan(std::move(key_prefix), total, pause)) {}

std::vector<std::string> PaymentLoad::payment_ids() const {
  std::vector<std::string> ids;
  for (const client::Created& c : load_.Results()) {
    if (!c.payment_id.empty()) ids.push_back(c.payment_id);
  }
  return ids;
}

CheckResult RunChecker(ServiceSet& services) {
  return RunChecker(services, -1);
}

CheckResult RunChecker(ServiceSet& services, int shard) {
  Process p;
  const std::string log = services.dir() + "/outbox_check.out";
  std::remove(log.c_str());
  std::vector<std::string> args = {"--json", "--accounting_db=" + services.accounting_dbs()};
  if (shard < 0) {
    args.push_back("--payment_db=" + services.payment_db());
  } else {
    args.push_back("--payment_db=" + services.payment_shard_db(shard));
    args.push_back("--payment_id_prefix=" + PaymentIdPrefix(shard, services.payment_shard_count()));
  }
  Env env;  // on PostgreSQL the URIs name no password: the services' passfile
  if (OnPostgres()) env["PGPASSFILE"] = services.ServiceEnv().at("PGPASSFILE");
  p.Start(BinaryPath("outbox_check"), args, env, log);
  CheckResult r;
  r.exit_code = p.WaitExit(absl::Seconds(120));
  r.output = p.Log();
  return r;
}

int WaitAllSent(ServiceSet& services, size_t expected, absl::Duration timeout) {
  int sent = 0;
  PollUntil(
      [&] {
        try {
          auto all = services.AllPayments();
          sent = 0;
          for (const auto& p : all) sent += p.outbox().status() == ::payment::v1::SENT;
          return all.size() == expected && static_cast<size_t>(sent) == expected;
        } catch (const std::exception&) {
          return false;  // the payment service is restarting
        }
      },
      timeout, absl::Milliseconds(250));
  return sent;
}

std::vector<::payment::v1::Payment> CreatePayments(ServiceSet& services, const std::string& prefix,
                                                   int n) {
  std::vector<::payment::v1::Payment> created;
  for (int i = 0; i < n; ++i) {
    ::payment::v1::CreatePaymentResponse resp;
    grpc::ClientContext ctx;
    grpc::Status st =
        services.payments().CreatePayment(&ctx, client::PaymentRequest(prefix, i, "e2e"), &resp);
    EXPECT_OK(client::FromGrpc(st, "CreatePayment"));
    created.push_back(resp.payment());
  }
  return created;
}

::ops::v1::Stats OpsStats(ServiceSet::Recovery& recovery) {
  grpc::ClientContext ctx;
  ::ops::v1::Stats stats;
  grpc::Status s = recovery.ops->GetStats(&ctx, {}, &stats);
  EXPECT_OK(client::FromGrpc(s, "GetStats"));
  return stats;
}

}  // namespace outbox::testing
