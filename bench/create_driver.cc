#include "bench/create_driver.h"

#include <chrono>
#include <thread>
#include <utility>

#include "absl/time/clock.h"
#include "client/channel.h"
#include "client/request.h"

namespace outbox::bench {

struct CreateDriver::Call {
  grpc::ClientContext ctx;
  ::payment::v1::CreatePaymentResponse response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReaderInterface<::payment::v1::CreatePaymentResponse>>
      reader;
  absl::Time start;  // when it was (or, open loop, should have been) sent
  bool measured = false;
  int64_t amount_minor = 0;  // asked for, written to the ledger
};

CreateDriver::CreateDriver(std::vector<std::unique_ptr<PaymentStub>> stubs, std::string run_tag,
                           std::FILE* ledger)
    : stubs_(std::move(stubs)), run_tag_(std::move(run_tag)), ledger_(ledger) {}

CreateDriver::~CreateDriver() {
  cq_.Shutdown();
  void* tag;
  bool ok;
  while (cq_.Next(&tag, &ok)) delete static_cast<Call*>(tag);
}

std::string CreateDriver::MeasuredPrefix(const std::string& run_tag) {
  return client::KeyPrefix("m", run_tag);
}

DriveResult CreateDriver::ClosedLoop(int concurrency, absl::Duration warmup,
                                     absl::Duration duration) {
  DriveResult r;
  const absl::Time start = absl::Now();
  window_start_ = start + warmup;
  window_end_ = window_start_ + duration;
  int64_t in_flight = 0;
  for (int i = 0; i < concurrency; ++i, ++in_flight) Issue(start, start >= window_start_);
  while (in_flight > 0) {
    void* tag;
    bool ok;
    if (!cq_.Next(&tag, &ok)) break;
    const absl::Time now = absl::Now();
    Complete(static_cast<Call*>(tag), now, &r);
    --in_flight;
    if (now < window_end_) {
      Issue(now, now >= window_start_);
      ++in_flight;
    }
  }
  return r;
}

DriveResult CreateDriver::OpenLoop(double rate, absl::Duration warmup, absl::Duration duration,
                                   int max_in_flight) {
  DriveResult r;
  const absl::Time start = absl::Now();
  window_start_ = start + warmup;
  window_end_ = window_start_ + duration;
  std::atomic<int64_t> in_flight{0};
  std::atomic<bool> pacing_done{false};
  std::atomic<int64_t> skipped{0};
  std::thread pacer([&] {
    const absl::Duration interval = absl::Seconds(1) / rate;
    for (int64_t i = 0;; ++i) {
      const absl::Time scheduled = start + interval * i;
      if (scheduled >= window_end_) break;
      const absl::Duration wait = scheduled - absl::Now();
      if (wait > absl::ZeroDuration()) absl::SleepFor(wait);
      if (in_flight.load() >= max_in_flight) {
        if (scheduled >= window_start_) skipped.fetch_add(1);
        continue;
      }
      in_flight.fetch_add(1);
      Issue(scheduled, scheduled >= window_start_);
    }
    pacing_done.store(true);
  });
  while (true) {
    void* tag;
    bool ok;
    const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(100);
    const auto got = cq_.AsyncNext(&tag, &ok, deadline);
    if (got == grpc::CompletionQueue::SHUTDOWN) break;
    if (got == grpc::CompletionQueue::GOT_EVENT) {
      Complete(static_cast<Call*>(tag), absl::Now(), &r);
      in_flight.fetch_sub(1);
    }
    if (pacing_done.load() && in_flight.load() == 0) break;
  }
  pacer.join();
  r.skipped = skipped.load();
  return r;
}

void CreateDriver::Issue(absl::Time start, bool measured) {
  const int64_t seq = next_seq_.fetch_add(1);
  auto* call = new Call;
  call->start = start;
  call->measured = measured;
  client::SetTimeout(&call->ctx, absl::Seconds(30));
  const ::payment::v1::CreatePaymentRequest req = client::PaymentRequest(
      measured ? MeasuredPrefix(run_tag_) : client::KeyPrefix("w", run_tag_), seq, "outbox_bench");
  call->amount_minor = req.amount_minor();
  PaymentStub& stub = *stubs_[static_cast<size_t>(seq) % stubs_.size()];
  call->reader = stub.PrepareAsyncCreatePayment(&call->ctx, req, &cq_);
  call->reader->StartCall();
  call->reader->Finish(&call->response, &call->status, call);
}

void CreateDriver::Complete(Call* call, absl::Time now, DriveResult* r) {
  if (call->status.ok()) ++r->ok_all;
  if (call->status.ok() && now >= window_start_ && now < window_end_) ++r->ok_in_window;
  if (call->status.ok() && ledger_ != nullptr) {
    const ::payment::v1::Payment& p = call->response.payment();
    std::fprintf(ledger_, "%s,%lld,%s\n", p.payment_id().c_str(),
                 static_cast<long long>(call->amount_minor), p.outbox().message_id().c_str());
  }
  if (call->measured) {
    if (call->status.ok()) {
      ++r->ok;
      r->latency_ms.push_back(absl::ToDoubleMilliseconds(now - call->start));
    } else {
      ++r->failed;
      ++r->errors_by_code[call->status.error_code()];
      if (r->first_error.empty()) r->first_error = call->status.error_message();
    }
  }
  delete call;
}

}  // namespace outbox::bench
