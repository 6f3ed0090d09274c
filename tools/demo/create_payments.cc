#include "tools/demo/create_payments.h"

#include <cstdio>
#include <memory>
#include <utility>

#include "client/request.h"
#include "client/sharded_payment_stub.h"
#include "payment/v1/payment.grpc.pb.h"

namespace outbox::demo {

CreatePhase CreatePayments(const Config& c, const std::string& run_id, absl::Time start) {
  std::vector<std::unique_ptr<payment::v1::PaymentService::StubInterface>> stubs;
  for (int t = 0; t < c.concurrency; ++t) {
    stubs.push_back(client::NewPaymentStub(c.payment_addrs, c.security));
  }
  client::LoadPlan plan;
  plan.key_prefix = client::KeyPrefix("demo", run_id);
  plan.description = kDescription;
  plan.count = c.count;
  if (c.by_time) plan.until = start + c.duration;
  plan.max_failures = c.retry ? 0 : kMaxCreateFailures;
  plan.retry = c.retry ? UntilTimeout(c.timeout) : FewTries();
  client::CreateLoad load(std::move(stubs), plan, [](const client::Created& r) {
    if (r.status.ok()) return;
    std::fprintf(stderr, "outbox_demo: create %lld failed: %d %s\n",
                 static_cast<long long>(r.index), static_cast<int>(r.status.error_code()),
                 r.status.error_message().c_str());
  });
  load.Join();
  CreatePhase out;
  out.created = load.Results();
  out.failed = load.failed();
  out.retries = load.retries();
  out.n_created = load.created();
  out.wanted = c.by_time ? static_cast<int64_t>(out.created.size()) : c.count;
  for (const client::Created& r : out.created) {
    if (r.status.ok()) out.latency_ms.push_back(absl::ToDoubleMilliseconds(r.latency));
  }
  if (!c.retry && out.failed >= kMaxCreateFailures) {
    std::fprintf(stderr, "outbox_demo: gave up creating after %lld failures\n",
                 static_cast<long long>(out.failed));
  }
  return out;
}

}  // namespace outbox::demo
