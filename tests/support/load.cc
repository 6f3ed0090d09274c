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
  if (OnPostgres()) return AuditThroughApis(services, shard);
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
  p.Start(BinaryPath("outbox_check"), args, {}, log);
  CheckResult r;
  r.exit_code = p.WaitExit(absl::Seconds(120));
  r.output = p.Log();
  return r;
}

CheckResult AuditThroughApis(ServiceSet& services, int shard) {
  CheckResult result;
  std::vector<::payment::v1::Payment> payments;
  std::vector<::accounting::v1::Voucher> vouchers;
  std::string prefix;
  absl::Status listed;
  if (shard < 0) {
    try {
      payments = services.AllPayments();
    } catch (const std::exception& e) {
      listed = absl::UnavailableError(e.what());
    }
  } else {
    prefix = PaymentIdPrefix(shard, services.payment_shard_count());
    auto stub = services.PaymentShardStub(shard);
    listed = client::ForEachPayment(
        *stub, ::payment::v1::OUTBOX_STATUS_UNSPECIFIED, Scaled(absl::Seconds(10)),
        [&](const ::payment::v1::Payment& p) { payments.push_back(p); });
  }
  try {
    const std::vector<int> shards = services.accounting_shard_ids();
    if (shards.empty()) vouchers = services.AllVouchers();
    for (int s : shards) {
      for (auto& v : services.ShardVouchers(s)) vouchers.push_back(std::move(v));
    }
  } catch (const std::exception& e) {
    if (listed.ok()) listed = absl::UnavailableError(e.what());
  }
  if (!listed.ok()) {
    result.exit_code = 2;
    result.output = absl::StrCat("{\"ok\": false, \"error\": \"", listed.message(), "\"}");
    return result;
  }

  std::map<std::string, std::vector<const ::accounting::v1::Voucher*>> by_payment;
  for (const auto& v : vouchers) by_payment[v.payment_id()].push_back(&v);
  std::map<std::string, const ::payment::v1::Payment*> payment_of;
  for (const auto& p : payments) payment_of[p.payment_id()] = &p;

  struct Check {
    const char* name;
    std::vector<std::string> examples;  // payment ids
  };
  std::vector<Check> checks = {{"payment_without_outbox", {}},  {"sent_without_voucher", {}},
                               {"failed_with_voucher", {}},     {"payment_multiple_vouchers", {}},
                               {"voucher_amount_mismatch", {}}, {"voucher_message_id_mismatch", {}},
                               {"voucher_without_payment", {}}};
  int64_t sent = 0, sending = 0, failed = 0;
  for (const auto& p : payments) {
    const auto status = p.outbox().status();
    sent += status == ::payment::v1::SENT;
    sending += status == ::payment::v1::SENDING;
    failed += status == ::payment::v1::FAILED;
    const auto found = by_payment.find(p.payment_id());
    const size_t booked = found == by_payment.end() ? 0 : found->second.size();
    if (p.outbox().message_id().empty()) checks[0].examples.push_back(p.payment_id());
    if (status == ::payment::v1::SENT && booked == 0) checks[1].examples.push_back(p.payment_id());
    if (status == ::payment::v1::FAILED && booked > 0) checks[2].examples.push_back(p.payment_id());
    if (booked > 1) checks[3].examples.push_back(p.payment_id());
    if (booked == 0) continue;
    for (const auto* v : found->second) {
      if (v->amount_minor() != p.amount_minor() || v->currency() != p.currency()) {
        checks[4].examples.push_back(p.payment_id());
      }
      if (v->message_id() != p.outbox().message_id()) checks[5].examples.push_back(p.payment_id());
    }
  }
  for (const auto& [payment_id, booked] : by_payment) {
    if (!absl::StartsWith(payment_id, prefix)) continue;  // another payment shard's
    if (payment_of.count(payment_id) == 0) checks[6].examples.push_back(payment_id);
  }

  bool ok = true;
  std::string out = absl::StrCat("{\"audit\": \"through the services' APIs\", \"ok\": ");
  std::string listed_checks;
  for (const Check& c : checks) {
    ok = ok && c.examples.empty();
    std::string examples;
    for (size_t i = 0; i < c.examples.size() && i < 10; ++i) {
      absl::StrAppend(&examples, i == 0 ? "" : ", ", "\"", c.examples[i], "\"");
    }
    absl::StrAppend(&listed_checks, listed_checks.empty() ? "" : ", ", "{\"name\": \"", c.name,
                    "\", \"count\": ", c.examples.size(), ", \"examples\": [", examples, "]}");
  }
  absl::StrAppend(&out, ok ? "true" : "false", ", \"counts\": {\"payments\": ", payments.size(),
                  ", \"outbox_sending\": ", sending, ", \"outbox_sent\": ", sent,
                  ", \"outbox_failed\": ", failed, ", \"vouchers\": ", vouchers.size(),
                  "}, \"checks\": [", listed_checks, "]}\n");
  result.exit_code = ok ? 0 : 1;
  result.output = std::move(out);
  return result;
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
