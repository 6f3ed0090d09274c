#include "tests/support/load.h"

#include "absl/strings/str_cat.h"

namespace outbox::testing {

PaymentLoad::PaymentLoad(ServiceSet& services, std::string key_prefix, int total, int threads,
                         absl::Duration pause)
    : services_(services), prefix_(std::move(key_prefix)), total_(total), threads_(threads),
      pause_(pause) {
  for (int t = 0; t < threads_; ++t) workers_.emplace_back([this, t] { Run(t); });
}

void PaymentLoad::Join() {
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
}

std::vector<std::string> PaymentLoad::payment_ids() const {
  absl::MutexLock lock(&mu_);
  return ids_;
}

void PaymentLoad::Run(int) {
  const absl::Time give_up = absl::Now() + absl::Minutes(3);
  for (int i = next_++; i < total_; i = next_++) {
    ::payment::v1::CreatePaymentRequest r;
    r.set_idempotency_key(absl::StrCat(prefix_, i));
    r.set_payer_account(absl::StrCat("payer-", i % 17));
    r.set_payee_account(absl::StrCat("payee-", i % 13));
    r.set_amount_minor(1000 + i);
    r.set_currency("EUR");
    r.set_description("load");
    while (absl::Now() < give_up) {
      ::payment::v1::CreatePaymentResponse resp;
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      grpc::Status s = services_.payments().CreatePayment(&ctx, r, &resp);
      if (s.ok()) {
        ++created_;
        absl::MutexLock lock(&mu_);
        ids_.push_back(resp.payment().payment_id());
        break;
      }
      ++retries_;
      absl::SleepFor(absl::Milliseconds(100));
    }
    if (pause_ > absl::ZeroDuration()) absl::SleepFor(pause_);
  }
  ++finished_threads_;
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
