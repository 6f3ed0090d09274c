#include "client/create_load.h"

#include <algorithm>
#include <utility>

#include "absl/time/clock.h"
#include "client/request.h"

namespace outbox::client {

CreateLoad::CreateLoad(
    std::vector<std::unique_ptr<payment::v1::PaymentService::StubInterface>> stubs, LoadPlan plan,
    Observer on_created)
    : stubs_(std::move(stubs)), plan_(std::move(plan)), on_created_(std::move(on_created)) {
  for (const auto& stub : stubs_) threads_.emplace_back([this, s = stub.get()] { Run(*s); });
}

void CreateLoad::Join() {
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

std::vector<Created> CreateLoad::Results() const {
  std::vector<Created> out;
  {
    MutexLock lock(&mu_);
    out = results_;
  }
  std::sort(out.begin(), out.end(),
            [](const Created& a, const Created& b) { return a.index < b.index; });
  return out;
}

void CreateLoad::Run(payment::v1::PaymentService::StubInterface& stub) {
  const bool by_time = plan_.until != absl::InfiniteFuture();
  while (plan_.max_failures == 0 || failed_.load() < plan_.max_failures) {
    if (by_time && absl::Now() >= plan_.until) break;
    const int64_t i = next_++;
    if (!by_time && i >= plan_.count) break;
    Created c;
    c.index = i;
    c.request = PaymentRequest(plan_.key_prefix, i, plan_.description);
    payment::v1::CreatePaymentResponse response;
    const absl::Time start = absl::Now();
    c.status = CreateWithRetries(stub, c.request, plan_.retry, &response, &c.retries);
    c.latency = absl::Now() - start;
    retries_ += c.retries;
    if (c.status.ok()) {
      c.payment_id = response.payment().payment_id();
      ++created_;
    } else {
      ++failed_;
    }
    if (on_created_) on_created_(c);
    {
      MutexLock lock(&mu_);
      results_.push_back(std::move(c));
    }
    if (plan_.pause > absl::ZeroDuration()) absl::SleepFor(plan_.pause);
  }
  ++finished_threads_;
}

}  // namespace outbox::client
