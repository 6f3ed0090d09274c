#include "tests/support/load.h"

#include <memory>
#include <utility>

namespace outbox::testing {
namespace {

// A crashed or restarting service fails calls for a while: the same key is
// tried again every 100 ms, for up to 3 minutes per payment.
loadgen::LoadPlan Plan(std::string key_prefix, int total, absl::Duration pause) {
  loadgen::LoadPlan plan;
  plan.key_prefix = std::move(key_prefix);
  plan.description = "load";
  plan.count = total;
  plan.pause = pause;
  plan.retry.max_attempts = 0;
  plan.retry.retry_for = absl::Minutes(3);
  plan.retry.retry_unknown = true;
  plan.retry.first_backoff = plan.retry.max_backoff = absl::Milliseconds(100);
  plan.retry.call_timeout = absl::Seconds(5);
  return plan;
}

// One stub per thread, all on the services' channel (it follows restarts).
std::vector<std::unique_ptr<::payment::v1::PaymentService::StubInterface>> Stubs(
    ServiceSet& services, int threads) {
  std::vector<std::unique_ptr<::payment::v1::PaymentService::StubInterface>> stubs;
  for (int t = 0; t < threads; ++t) {
    stubs.push_back(::payment::v1::PaymentService::NewStub(services.payment_channel()));
  }
  return stubs;
}

}  // namespace

PaymentLoad::PaymentLoad(ServiceSet& services, std::string key_prefix, int total, int threads,
                         absl::Duration pause)
    : load_(Stubs(services, threads), Plan(std::move(key_prefix), total, pause)) {}

std::vector<std::string> PaymentLoad::payment_ids() const {
  std::vector<std::string> ids;
  for (const loadgen::Created& c : load_.Results()) {
    if (!c.payment_id.empty()) ids.push_back(c.payment_id);
  }
  return ids;
}

CheckResult RunChecker(const ServiceSet& services) {
  Process p;
  const std::string log = services.dir() + "/outbox_check.out";
  std::remove(log.c_str());
  p.Start(BinaryPath("outbox_check"),
          {"--json", "--payment_db=" + services.dir() + "/payment.db",
           "--accounting_db=" + services.dir() + "/accounting.db"},
          {}, log);
  CheckResult r;
  r.exit_code = p.WaitExit(absl::Seconds(120));
  r.output = p.Log();
  return r;
}

int WaitAllSent(ServiceSet& services, size_t expected, absl::Duration timeout) {
  int sent = 0;
  PollUntil([&] {
    try {
      auto all = services.AllPayments();
      sent = 0;
      for (const auto& p : all) sent += p.outbox().status() == ::payment::v1::SENT;
      return all.size() == expected && static_cast<size_t>(sent) == expected;
    } catch (const std::exception&) {
      return false;  // the payment service is restarting
    }
  }, timeout, absl::Milliseconds(250));
  return sent;
}

}  // namespace outbox::testing
