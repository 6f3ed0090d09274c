// outbox_demo: drives payments through a running payment_service and
// accounting_service over gRPC and checks the outcome end to end: every
// payment reaches outbox status SENT and has exactly one voucher; replays
// return the same payment; bad requests get INVALID_ARGUMENT.
// Exit status 0 only if all of that holds.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "accounting/v1/accounting.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "payment/v1/payment.grpc.pb.h"

ABSL_FLAG(std::string, payment_addr, "127.0.0.1:50051", "payment_service address (host:port)");
ABSL_FLAG(std::string, accounting_addr, "127.0.0.1:50052", "accounting_service address (host:port)");
ABSL_FLAG(int, count, 300, "payments to create");
ABSL_FLAG(int, concurrency, 8, "client threads creating payments, one channel each");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(60),
          "how long to wait for every payment to turn SENT");
ABSL_FLAG(int, wait_healthy, 0,
          "seconds to wait for both services to report SERVING before starting (0: don't wait)");

namespace {

using accounting::v1::AccountingService;
using payment::v1::CreatePaymentRequest;
using payment::v1::CreatePaymentResponse;
using payment::v1::PaymentService;

constexpr int kPageSize = 1000;
constexpr int kMaxReplays = 5;
constexpr int kMaxCreateFailures = 20;
constexpr absl::Duration kCallTimeout = absl::Seconds(10);

// A channel with its own connection (a local subchannel pool), so client
// threads do not all share one HTTP/2 connection.
std::shared_ptr<grpc::Channel> NewChannel(const std::string& addr) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(addr, grpc::InsecureChannelCredentials(), args);
}

void SetDeadline(grpc::ClientContext* ctx, absl::Duration d) {
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + d));
}

std::string RandomHex(int bytes) {
  std::random_device rd;
  std::string out;
  for (int i = 0; i < bytes; ++i) absl::StrAppend(&out, absl::Hex(rd() & 0xff, absl::kZeroPad2));
  return out;
}

// Polls grpc.health.v1 until `addr` reports SERVING or `deadline` passes.
bool WaitHealthy(const std::string& addr, absl::Time deadline) {
  auto stub = grpc::health::v1::Health::NewStub(NewChannel(addr));
  grpc::Status last;
  while (true) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, absl::Seconds(2));
    grpc::health::v1::HealthCheckRequest req;
    grpc::health::v1::HealthCheckResponse resp;
    last = stub->Check(&ctx, req, &resp);
    if (last.ok() && resp.status() == grpc::health::v1::HealthCheckResponse::SERVING) return true;
    if (absl::Now() > deadline) break;
    absl::SleepFor(absl::Milliseconds(200));
  }
  std::fprintf(stderr, "outbox_demo: %s not healthy: %s\n", addr.c_str(),
               last.ok() ? "NOT_SERVING" : last.error_message().c_str());
  return false;
}

CreatePaymentRequest DemoRequest(const std::string& run_id, int i) {
  CreatePaymentRequest req;
  req.set_idempotency_key(absl::StrCat("demo-", run_id, "-", i));
  req.set_payer_account(absl::StrCat("payer-", i % 50));
  req.set_payee_account(absl::StrCat("payee-", i % 37));
  req.set_amount_minor(100 + i);
  req.set_currency("EUR");
  req.set_description(absl::StrCat("outbox demo payment ", i));
  return req;
}

// Creates one payment, retrying transient failures with the same key (safe:
// the key makes the call idempotent).
grpc::Status Create(PaymentService::Stub& stub, const CreatePaymentRequest& req,
                    CreatePaymentResponse* resp) {
  grpc::Status status;
  for (int attempt = 0; attempt < 5; ++attempt) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, kCallTimeout);
    status = stub.CreatePayment(&ctx, req, resp);
    const bool transient = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                           status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (!transient) break;
    absl::SleepFor(absl::Milliseconds(100 << attempt));
  }
  return status;
}

struct Created {
  std::string payment_id;  // empty: creation failed
  CreatePaymentRequest request;
  absl::Duration latency;
};

std::vector<Created> CreateAll(const std::string& addr, const std::string& run_id, int count,
                               int concurrency) {
  std::vector<Created> out(count);
  std::atomic<int> next{0};
  std::atomic<int> failures{0};  // past kMaxCreateFailures the service is down: stop
  std::vector<std::thread> threads;
  for (int t = 0; t < concurrency; ++t) {
    threads.emplace_back([&] {
      auto stub = PaymentService::NewStub(NewChannel(addr));
      for (int i = next++; i < count && failures < kMaxCreateFailures; i = next++) {
        Created& c = out[i];  // each index is written by exactly one thread
        c.request = DemoRequest(run_id, i);
        CreatePaymentResponse resp;
        const absl::Time start = absl::Now();
        grpc::Status status = Create(*stub, c.request, &resp);
        c.latency = absl::Now() - start;
        if (status.ok()) {
          c.payment_id = resp.payment().payment_id();
        } else {
          ++failures;
          std::fprintf(stderr, "outbox_demo: create %d failed: %d %s\n", i,
                       static_cast<int>(status.error_code()), status.error_message().c_str());
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  if (failures >= kMaxCreateFailures) {
    std::fprintf(stderr, "outbox_demo: gave up creating after %d failures\n", failures.load());
  }
  return out;
}

// Requests that must be rejected with INVALID_ARGUMENT.
std::vector<std::pair<std::string, CreatePaymentRequest>> InvalidRequests(const std::string& run_id) {
  std::vector<std::pair<std::string, CreatePaymentRequest>> out;
  auto add = [&](const std::string& what, const std::function<void(CreatePaymentRequest&)>& f) {
    CreatePaymentRequest r = DemoRequest(run_id, 0);
    r.set_idempotency_key(absl::StrCat("demo-invalid-", run_id, "-", out.size()));
    f(r);
    out.emplace_back(what, std::move(r));
  };
  add("empty idempotency_key", [](auto& r) { r.clear_idempotency_key(); });
  add("idempotency_key too long", [](auto& r) { r.set_idempotency_key(std::string(129, 'k')); });
  add("zero amount", [](auto& r) { r.set_amount_minor(0); });
  add("negative amount", [](auto& r) { r.set_amount_minor(-5); });
  add("lower-case currency", [](auto& r) { r.set_currency("eur"); });
  add("payer == payee", [](auto& r) { r.set_payee_account(r.payer_account()); });
  add("empty payer", [](auto& r) { r.clear_payer_account(); });
  return out;
}

// Calls `fetch(page_token, &next_token)` until the last page.
bool ForEachPage(const std::function<grpc::Status(const std::string&, std::string*)>& fetch) {
  std::string token;
  do {
    std::string next;
    grpc::Status s = fetch(token, &next);
    if (!s.ok()) {
      std::fprintf(stderr, "outbox_demo: list failed: %s\n", s.error_message().c_str());
      return false;
    }
    token = std::move(next);
  } while (!token.empty());
  return true;
}

// All payments (optionally of one outbox status), fed to `on_payment`.
bool ListPayments(PaymentService::Stub& stub, payment::v1::OutboxStatus status,
                  const std::function<void(const payment::v1::Payment&)>& on_payment) {
  return ForEachPage([&](const std::string& token, std::string* next) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, kCallTimeout);
    payment::v1::ListPaymentsRequest req;
    req.set_page_size(kPageSize);
    req.set_page_token(token);
    req.set_status(status);
    payment::v1::ListPaymentsResponse resp;
    grpc::Status s = stub.ListPayments(&ctx, req, &resp);
    for (const auto& p : resp.payments()) on_payment(p);
    *next = resp.next_page_token();
    return s;
  });
}

bool VoucherMatches(const accounting::v1::Voucher& v, const CreatePaymentRequest& r) {
  return v.debit_account() == r.payer_account() && v.credit_account() == r.payee_account() &&
         v.amount_minor() == r.amount_minor() && v.currency() == r.currency();
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string payment_addr = absl::GetFlag(FLAGS_payment_addr);
  const std::string accounting_addr = absl::GetFlag(FLAGS_accounting_addr);
  const int count = std::max(1, absl::GetFlag(FLAGS_count));
  const int concurrency = std::max(1, absl::GetFlag(FLAGS_concurrency));

  if (absl::GetFlag(FLAGS_wait_healthy) > 0) {
    const absl::Time deadline = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_wait_healthy));
    if (!WaitHealthy(payment_addr, deadline) || !WaitHealthy(accounting_addr, deadline)) return 2;
  }
  auto payments = PaymentService::NewStub(NewChannel(payment_addr));
  auto accounting = AccountingService::NewStub(NewChannel(accounting_addr));
  const std::string run_id = RandomHex(6);
  std::printf("outbox_demo: run %s, %d payments, %d client threads\n", run_id.c_str(), count,
              concurrency);

  // 1. Create.
  const absl::Time start = absl::Now();
  std::vector<Created> created = CreateAll(payment_addr, run_id, count, concurrency);
  const absl::Duration create_elapsed = absl::Now() - start;
  std::unordered_map<std::string, const Created*> ours;  // payment_id -> what we sent
  std::vector<absl::Duration> latencies;
  for (const Created& c : created) {
    if (c.payment_id.empty()) continue;
    ours.emplace(c.payment_id, &c);
    latencies.push_back(c.latency);
  }
  const int n_created = static_cast<int>(ours.size());

  // 2. Replays: same key and request -> same payment, replayed=true.
  //    Same key, different request -> rejected.
  int replays = 0, replays_ok = 0;
  for (int i = 0; i < count && replays < kMaxReplays; ++i) {
    if (created[i].payment_id.empty()) continue;
    ++replays;
    CreatePaymentResponse resp;
    grpc::Status s = Create(*payments, created[i].request, &resp);
    if (s.ok() && resp.replayed() && resp.payment().payment_id() == created[i].payment_id) {
      ++replays_ok;
    } else {
      std::fprintf(stderr, "outbox_demo: replay of %d: status %d replayed=%d id=%s\n", i,
                   static_cast<int>(s.error_code()), resp.replayed(),
                   resp.payment().payment_id().c_str());
    }
  }
  bool reuse_rejected = true;
  if (!created[0].payment_id.empty()) {
    CreatePaymentRequest changed = created[0].request;
    changed.set_amount_minor(changed.amount_minor() + 1);
    CreatePaymentResponse resp;
    grpc::Status s = Create(*payments, changed, &resp);
    reuse_rejected = s.error_code() == grpc::StatusCode::ALREADY_EXISTS ||
                     s.error_code() == grpc::StatusCode::FAILED_PRECONDITION;
    if (!reuse_rejected) {
      std::fprintf(stderr, "outbox_demo: key reuse with another amount got status %d\n",
                   static_cast<int>(s.error_code()));
    }
  }

  // 3. Invalid requests -> INVALID_ARGUMENT.
  const auto invalid = InvalidRequests(run_id);
  int invalid_rejected = 0;
  for (const auto& [what, req] : invalid) {
    CreatePaymentResponse resp;
    grpc::Status s = Create(*payments, req, &resp);
    if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      ++invalid_rejected;
    } else {
      std::fprintf(stderr, "outbox_demo: invalid request (%s) got status %d\n", what.c_str(),
                   static_cast<int>(s.error_code()));
    }
  }

  // 4. Wait until none of ours is SENDING (listing only SENDING rows keeps
  //    each poll proportional to the backlog, not the table).
  const absl::Time wait_deadline = absl::Now() + absl::GetFlag(FLAGS_timeout);
  absl::Time drained_at = absl::InfiniteFuture();
  while (true) {
    int sending = 0;
    bool ok = ListPayments(*payments, payment::v1::SENDING, [&](const payment::v1::Payment& p) {
      if (ours.count(p.payment_id()) != 0 && p.outbox().status() == payment::v1::SENDING) ++sending;
    });
    if (ok && sending == 0) {
      drained_at = absl::Now();
      break;
    }
    if (absl::Now() > wait_deadline) break;
    absl::SleepFor(absl::Milliseconds(200));
  }

  // 5. Final tally of our rows, all statuses.
  int sent = 0, sending = 0, failed = 0, retried = 0, seen = 0;
  bool listed = ListPayments(*payments, payment::v1::OUTBOX_STATUS_UNSPECIFIED,
                             [&](const payment::v1::Payment& p) {
                               if (ours.count(p.payment_id()) == 0) return;
                               ++seen;
                               switch (p.outbox().status()) {
                                 case payment::v1::SENT: ++sent; break;
                                 case payment::v1::SENDING: ++sending; break;
                                 case payment::v1::FAILED: ++failed; break;
                                 default: break;
                               }
                               if (p.outbox().attempts() > 1) ++retried;
                             });

  // 6. Vouchers: exactly one per payment, matching it.
  std::unordered_map<std::string, int> vouchers_per_payment;
  int vouchers = 0, mismatched = 0;
  bool vouchers_listed = ForEachPage([&](const std::string& token, std::string* next) {
    grpc::ClientContext ctx;
    SetDeadline(&ctx, kCallTimeout);
    accounting::v1::ListVouchersRequest req;
    req.set_page_size(kPageSize);
    req.set_page_token(token);
    accounting::v1::ListVouchersResponse resp;
    grpc::Status s = accounting->ListVouchers(&ctx, req, &resp);
    for (const auto& v : resp.vouchers()) {
      auto it = ours.find(v.payment_id());
      if (it == ours.end()) continue;
      ++vouchers;
      ++vouchers_per_payment[v.payment_id()];
      if (!VoucherMatches(v, it->second->request)) ++mismatched;
    }
    *next = resp.next_page_token();
    return s;
  });
  int duplicates = 0, without_voucher = 0;
  for (const auto& [id, c] : ours) {
    const int n = vouchers_per_payment.count(id) ? vouchers_per_payment[id] : 0;
    if (n > 1) ++duplicates;
    if (n == 0) ++without_voucher;
  }
  // GetVoucher on a few, to exercise the point lookup too.
  int get_checked = 0, get_ok = 0;
  for (const auto& [id, c] : ours) {
    if (get_checked == kMaxReplays) break;
    ++get_checked;
    grpc::ClientContext ctx;
    SetDeadline(&ctx, kCallTimeout);
    accounting::v1::GetVoucherRequest req;
    req.set_payment_id(id);
    accounting::v1::Voucher v;
    if (accounting->GetVoucher(&ctx, req, &v).ok() && v.payment_id() == id &&
        VoucherMatches(v, c->request)) {
      ++get_ok;
    }
  }

  // 7. Report.
  std::sort(latencies.begin(), latencies.end());
  auto pct = [&](double q) {
    return latencies.empty() ? 0.0 : Ms(latencies[static_cast<size_t>(q * (latencies.size() - 1))]);
  };
  const double create_s = absl::ToDoubleSeconds(create_elapsed);
  const bool drained = drained_at != absl::InfiniteFuture();
  const double e2e_s = absl::ToDoubleSeconds((drained ? drained_at : absl::Now()) - start);
  const bool ok = n_created == count && listed && vouchers_listed && seen == n_created &&
                  sent == n_created && vouchers == n_created && duplicates == 0 &&
                  without_voucher == 0 && mismatched == 0 && get_ok == get_checked &&
                  replays_ok == replays && reuse_rejected &&
                  invalid_rejected == static_cast<int>(invalid.size());

  std::printf("\n=== outbox demo report (run %s) ===\n", run_id.c_str());
  std::printf("payments created       %d / %d\n", n_created, count);
  std::printf("create latency         p50 %.1f ms, p99 %.1f ms\n", pct(0.5), pct(0.99));
  std::printf("replays ok             %d / %d\n", replays_ok, replays);
  std::printf("key reuse rejected     %s\n", reuse_rejected ? "yes" : "NO");
  std::printf("invalid rejected       %d / %zu\n", invalid_rejected, invalid.size());
  std::printf("outbox SENT            %d\n", sent);
  std::printf("outbox SENDING         %d\n", sending);
  std::printf("outbox FAILED          %d\n", failed);
  std::printf("rows not found         %d\n", n_created - seen);
  std::printf("attempts > 1           %d (re-published by recovery)\n", retried);
  std::printf("vouchers               %d\n", vouchers);
  std::printf("duplicates             %d (payments with more than one voucher)\n", duplicates);
  std::printf("without voucher        %d\n", without_voucher);
  std::printf("voucher mismatches     %d (+ GetVoucher %d / %d ok)\n", mismatched, get_ok,
              get_checked);
  std::printf("create phase           %.2f s (%.0f payments/s)\n", create_s,
              create_s > 0 ? n_created / create_s : 0.0);
  std::printf("all SENT after         %s%.2f s (%.0f payments/s end to end)\n",
              drained ? "" : "NOT DRAINED, gave up at ", e2e_s, e2e_s > 0 ? sent / e2e_s : 0.0);
  std::printf("RESULT                 %s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
