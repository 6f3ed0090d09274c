// outbox_demo: drives payments through a running payment_service and
// accounting_service over gRPC and checks the outcome end to end: every
// payment reaches outbox status SENT and has exactly one matching voucher;
// replays return the same payment; bad requests get INVALID_ARGUMENT.
// Exit status 0 only if all of that holds (2: a service never became healthy).
//
// A run has three steps, each of which can be shaped or skipped by flags:
//   1. create   --count=N payments, or new ones for --duration=D (--count=0:
//               none); --retry retries each failed CreatePayment with the same
//               idempotency key until it succeeds or --timeout passes, as a
//               client of an idempotent API does; then (unless --skip_checks)
//               replays, key reuse and invalid requests are checked.
//   2. wait     until no payment of the set is SENDING (--timeout), then list
//               the vouchers and print the report. --wait_sent=false instead
//               prints a one-line outbox snapshot of the set and exits, without
//               touching accounting_service (which may be down).
//   3. the set  is this run's payments, plus the ids of --expect_ids (written
//               by an earlier run's --write_ids); with --report_all it is every
//               payment in payment.db and every voucher. An id acknowledged to
//               the client but missing from payment.db, and a payment without
//               a voucher once the wait is over, count as lost.
// Examples:
//   outbox_demo --count=300 --wait_healthy=60                  healthy run + report
//   outbox_demo --count=200 --skip_checks --wait_sent=false --write_ids=ids
//   outbox_demo --count=0 --wait_sent=false --expect_ids=ids   snapshot of those
//   outbox_demo --count=0 --expect_ids=ids                     wait for them, report
//   outbox_demo --duration=60s --retry --skip_checks --wait_sent=false --write_ids=ids
//   outbox_demo --count=0 --report_all --expect_ids=ids        audit everything
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "accounting/v1/accounting.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "payment/v1/payment.grpc.pb.h"

ABSL_FLAG(std::string, payment_addr, "127.0.0.1:50051", "payment_service address (host:port)");
ABSL_FLAG(std::string, accounting_addr, "127.0.0.1:50052", "accounting_service address (host:port)");
ABSL_FLAG(int, count, 300, "payments to create; 0 creates none (wait for / report on a set only)");
ABSL_FLAG(absl::Duration, duration, absl::ZeroDuration(),
          "if > 0: keep creating new payments until this much time has passed (--count is "
          "ignored)");
ABSL_FLAG(int, concurrency, 8, "client threads creating payments, one channel each");
ABSL_FLAG(absl::Duration, timeout, absl::Seconds(60),
          "how long to wait for every payment of the set to turn SENT; with --retry also "
          "how long one CreatePayment is retried before giving up on it");
ABSL_FLAG(int, wait_healthy, 0,
          "seconds to wait for the services this run talks to (payment_service; with "
          "--wait_sent also accounting_service) to report SERVING first (0: don't wait)");
ABSL_FLAG(bool, retry, false,
          "retry a failed CreatePayment with the same idempotency key until it succeeds or "
          "--timeout passes (no cap on failures); without it, 5 tries on UNAVAILABLE/"
          "DEADLINE_EXCEEDED and the run stops creating after 20 failed payments");
ABSL_FLAG(bool, skip_checks, false, "skip the replay, key-reuse and invalid-request checks");
ABSL_FLAG(bool, wait_sent, true,
          "wait until the set is SENT, then check vouchers and print the report; false: print "
          "a one-line outbox snapshot of the set and exit (accounting_service is not contacted)");
ABSL_FLAG(bool, report_all, false,
          "the set is every payment in payment.db (and every voucher), not only this run's");
ABSL_FLAG(std::string, write_ids, "",
          "write the ids of the payments acknowledged to this run to this file, one a line");
ABSL_FLAG(std::string, expect_ids, "",
          "file of payment ids acknowledged earlier (see --write_ids): they join the set, "
          "and any of them missing from payment.db counts as lost");

namespace {

using accounting::v1::AccountingService;
using payment::v1::CreatePaymentRequest;
using payment::v1::CreatePaymentResponse;
using payment::v1::PaymentService;

constexpr int kPageSize = 1000;
constexpr int kMaxReplays = 5;
constexpr int kMaxCreateFailures = 20;
constexpr int kListAttempts = 5;
constexpr absl::Duration kCallTimeout = absl::Seconds(10);

// A channel with its own connection (a local subchannel pool), so client
// threads do not all share one HTTP/2 connection. Reconnect backoff is capped
// at 1 s: a restarted service is used again at once, not after up to 2 minutes.
std::shared_ptr<grpc::Channel> NewChannel(const std::string& addr) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
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

CreatePaymentRequest DemoRequest(const std::string& run_id, int64_t i) {
  CreatePaymentRequest req;
  req.set_idempotency_key(absl::StrCat("demo-", run_id, "-", i));
  req.set_payer_account(absl::StrCat("payer-", i % 50));
  req.set_payee_account(absl::StrCat("payee-", i % 37));
  req.set_amount_minor(100 + i);
  req.set_currency("EUR");
  req.set_description(absl::StrCat("outbox demo payment ", i));
  return req;
}

// Errors that another try of the same request cannot change.
bool Permanent(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::OUT_OF_RANGE:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
    case grpc::StatusCode::UNIMPLEMENTED:
      return true;
    default:
      return false;
  }
}

// Creates one payment, retrying failures with the same key (safe: the key
// makes the call idempotent). Without `retry_until`: at most 5 tries, on
// UNAVAILABLE and DEADLINE_EXCEEDED only. With it: every non-permanent error
// is retried until that time. `*retries` counts the extra tries.
grpc::Status Create(PaymentService::Stub& stub, const CreatePaymentRequest& req,
                    CreatePaymentResponse* resp, absl::Time retry_until = absl::InfinitePast(),
                    int* retries = nullptr) {
  const bool keep_trying = retry_until != absl::InfinitePast();
  grpc::Status status;
  for (int attempt = 0;; ++attempt) {
    if (attempt > 0 && retries != nullptr) ++*retries;
    grpc::ClientContext ctx;
    SetDeadline(&ctx, kCallTimeout);
    status = stub.CreatePayment(&ctx, req, resp);
    if (status.ok()) break;
    if (keep_trying) {
      if (Permanent(status.error_code()) || absl::Now() > retry_until) break;
      absl::SleepFor(absl::Milliseconds(std::min(1000, 50 << std::min(attempt, 5))));
    } else {
      const bool transient = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                             status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
      if (!transient || attempt == 4) break;
      absl::SleepFor(absl::Milliseconds(100 << attempt));
    }
  }
  return status;
}

struct Created {
  int64_t index = 0;
  std::string payment_id;  // empty: creation failed
  CreatePaymentRequest request;
  absl::Duration latency;
};

struct CreateStats {
  std::vector<Created> created;  // in index order
  int64_t attempted = 0;
  int64_t failed = 0;   // payments given up on
  int64_t retries = 0;  // extra CreatePayment calls (--retry)
};

// Creates `count` payments, or new ones until `until` if that is finite.
CreateStats CreateAll(const std::string& addr, const std::string& run_id, int64_t count,
                      absl::Time until, int concurrency, bool retry, absl::Duration retry_for) {
  const bool by_time = until != absl::InfiniteFuture();
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> failures{0};  // without --retry: past kMaxCreateFailures, stop
  std::atomic<int64_t> retries{0};
  std::vector<std::vector<Created>> per_thread(concurrency);
  std::vector<std::thread> threads;
  for (int t = 0; t < concurrency; ++t) {
    threads.emplace_back([&, t] {
      auto stub = PaymentService::NewStub(NewChannel(addr));
      while (retry || failures < kMaxCreateFailures) {
        if (by_time && absl::Now() >= until) break;
        const int64_t i = next++;
        if (!by_time && i >= count) break;
        Created c;
        c.index = i;
        c.request = DemoRequest(run_id, i);
        CreatePaymentResponse resp;
        const absl::Time start = absl::Now();
        int tries = 0;
        grpc::Status status = Create(*stub, c.request, &resp,
                                     retry ? start + retry_for : absl::InfinitePast(), &tries);
        retries += tries;
        c.latency = absl::Now() - start;
        if (status.ok()) {
          c.payment_id = resp.payment().payment_id();
        } else {
          ++failures;
          std::fprintf(stderr, "outbox_demo: create %lld failed: %d %s\n",
                       static_cast<long long>(i), static_cast<int>(status.error_code()),
                       status.error_message().c_str());
        }
        per_thread[t].push_back(std::move(c));
      }
    });
  }
  for (auto& t : threads) t.join();
  CreateStats out;
  for (auto& v : per_thread) {
    for (auto& c : v) out.created.push_back(std::move(c));
  }
  std::sort(out.created.begin(), out.created.end(),
            [](const Created& a, const Created& b) { return a.index < b.index; });
  out.attempted = static_cast<int64_t>(out.created.size());
  out.failed = failures;
  out.retries = retries;
  if (!retry && failures >= kMaxCreateFailures) {
    std::fprintf(stderr, "outbox_demo: gave up creating after %lld failures\n",
                 static_cast<long long>(failures.load()));
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
    if (s.ok()) {
      for (const auto& p : resp.payments()) on_payment(p);
    }
    *next = resp.next_page_token();
    return s;
  });
}

// Runs a whole listing (`reset` then `list`) up to kListAttempts times, so a
// service that is just restarting does not spoil the report.
bool ListWithRetries(const std::function<void()>& reset, const std::function<bool()>& list) {
  for (int attempt = 1; attempt <= kListAttempts; ++attempt) {
    reset();
    if (list()) return true;
    if (attempt < kListAttempts) absl::SleepFor(absl::Seconds(1));
  }
  return false;
}

// What a payment's voucher must say.
struct Expected {
  bool known = false;  // false: not listed yet (an --expect_ids id)
  std::string payer, payee, currency;
  int64_t amount_minor = 0;
};

Expected FromRequest(const CreatePaymentRequest& r) {
  return {true, r.payer_account(), r.payee_account(), r.currency(), r.amount_minor()};
}

Expected FromPayment(const payment::v1::Payment& p) {
  return {true, p.payer_account(), p.payee_account(), p.currency(), p.amount_minor()};
}

bool VoucherMatches(const accounting::v1::Voucher& v, const Expected& e) {
  return e.known && v.debit_account() == e.payer && v.credit_account() == e.payee &&
         v.amount_minor() == e.amount_minor && v.currency() == e.currency;
}

double Ms(absl::Duration d) { return absl::ToDoubleMilliseconds(d); }

bool ReadIds(const std::string& path, std::vector<std::string>* ids) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view id = absl::StripAsciiWhitespace(line);
    if (!id.empty()) ids->emplace_back(id);
  }
  return !in.bad();
}

bool WriteIds(const std::string& path, const std::vector<Created>& created) {
  std::ofstream out(path, std::ios::trunc);
  for (const Created& c : created) {
    if (!c.payment_id.empty()) out << c.payment_id << '\n';
  }
  out.flush();
  return static_cast<bool>(out);
}

// Outbox tally of the set.
struct Tally {
  int64_t seen = 0, sent = 0, sending = 0, failed = 0, retried = 0;
  int max_attempts = 0;
  absl::Time newest_sent_at = absl::InfinitePast();
  std::unordered_set<std::string> in_db;  // ids of the set found in payment.db
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string payment_addr = absl::GetFlag(FLAGS_payment_addr);
  const std::string accounting_addr = absl::GetFlag(FLAGS_accounting_addr);
  const absl::Duration duration = absl::GetFlag(FLAGS_duration);
  const bool by_time = duration > absl::ZeroDuration();
  const int64_t count = by_time ? 0 : std::max(0, absl::GetFlag(FLAGS_count));
  const bool creating = by_time || count > 0;
  const int concurrency = std::max(1, absl::GetFlag(FLAGS_concurrency));
  const absl::Duration timeout = absl::GetFlag(FLAGS_timeout);
  const bool retry = absl::GetFlag(FLAGS_retry);
  const bool checks = creating && !absl::GetFlag(FLAGS_skip_checks);
  const bool wait_sent = absl::GetFlag(FLAGS_wait_sent);
  const bool report_all = absl::GetFlag(FLAGS_report_all);

  std::vector<std::string> expected_ids;
  if (!absl::GetFlag(FLAGS_expect_ids).empty() &&
      !ReadIds(absl::GetFlag(FLAGS_expect_ids), &expected_ids)) {
    std::fprintf(stderr, "outbox_demo: cannot read --expect_ids=%s\n",
                 absl::GetFlag(FLAGS_expect_ids).c_str());
    return 2;
  }

  const absl::Time program_start = absl::Now();
  if (absl::GetFlag(FLAGS_wait_healthy) > 0) {
    const absl::Time deadline = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_wait_healthy));
    if (!WaitHealthy(payment_addr, deadline)) return 2;
    if (wait_sent && !WaitHealthy(accounting_addr, deadline)) return 2;
  }
  auto payments = PaymentService::NewStub(NewChannel(payment_addr));
  const std::string run_id = RandomHex(6);
  if (creating) {
    std::printf("outbox_demo: run %s, %s, %d client threads%s\n", run_id.c_str(),
                by_time ? absl::StrCat("new payments for ", absl::FormatDuration(duration)).c_str()
                        : absl::StrCat(count, " payments").c_str(),
                concurrency, retry ? ", retrying failed creates" : "");
    std::fflush(stdout);
  }

  // 1. Create.
  const absl::Time start = absl::Now();
  CreateStats stats;
  if (creating) {
    stats = CreateAll(payment_addr, run_id, count,
                      by_time ? start + duration : absl::InfiniteFuture(), concurrency, retry,
                      timeout);
  }
  const std::vector<Created>& created = stats.created;
  const absl::Duration create_elapsed = absl::Now() - start;
  const int64_t wanted = by_time ? stats.attempted : count;

  // The set: payment_id -> what its voucher must say. `acked` are the ids a
  // client was given (here or in --expect_ids): each must be in payment.db.
  std::unordered_map<std::string, Expected> set;
  std::unordered_set<std::string> acked;
  std::vector<absl::Duration> latencies;
  int64_t n_created = 0;
  for (const Created& c : created) {
    if (c.payment_id.empty()) continue;
    ++n_created;
    set.emplace(c.payment_id, FromRequest(c.request));
    acked.insert(c.payment_id);
    latencies.push_back(c.latency);
  }
  int64_t n_expected_new = 0;  // --expect_ids not created by this run
  for (const std::string& id : expected_ids) {
    if (acked.insert(id).second) {
      ++n_expected_new;
      set.emplace(id, Expected{});
    }
  }
  if (!absl::GetFlag(FLAGS_write_ids).empty() &&
      !WriteIds(absl::GetFlag(FLAGS_write_ids), created)) {
    std::fprintf(stderr, "outbox_demo: cannot write --write_ids=%s\n",
                 absl::GetFlag(FLAGS_write_ids).c_str());
  }

  // 2. Replays: same key and request -> same payment, replayed=true.
  //    Same key, different request -> rejected.
  int replays = 0, replays_ok = 0;
  bool reuse_rejected = true;
  int invalid_rejected = 0;
  const auto invalid = InvalidRequests(run_id);
  if (checks) {
    for (size_t i = 0; i < created.size() && replays < kMaxReplays; ++i) {
      if (created[i].payment_id.empty()) continue;
      ++replays;
      CreatePaymentResponse resp;
      grpc::Status s = Create(*payments, created[i].request, &resp);
      if (s.ok() && resp.replayed() && resp.payment().payment_id() == created[i].payment_id) {
        ++replays_ok;
      } else {
        std::fprintf(stderr, "outbox_demo: replay of %zu: status %d replayed=%d id=%s\n", i,
                     static_cast<int>(s.error_code()), resp.replayed(),
                     resp.payment().payment_id().c_str());
      }
    }
    if (!created.empty() && !created[0].payment_id.empty()) {
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
  }
  const bool create_ok = by_time ? stats.failed == 0 : n_created == count;
  const bool checks_ok = !checks || (replays_ok == replays && reuse_rejected &&
                                     invalid_rejected == static_cast<int>(invalid.size()));

  auto in_set = [&](const std::string& id) { return report_all || set.count(id) != 0; };
  auto tally = [&](Tally* t) {
    return ListWithRetries([&] { *t = Tally{}; }, [&] {
      return ListPayments(*payments, payment::v1::OUTBOX_STATUS_UNSPECIFIED,
                          [&](const payment::v1::Payment& p) {
                            if (!in_set(p.payment_id())) return;
                            ++t->seen;
                            t->in_db.insert(p.payment_id());
                            Expected& e = set[p.payment_id()];
                            if (!e.known) e = FromPayment(p);
                            switch (p.outbox().status()) {
                              case payment::v1::SENT:
                                ++t->sent;
                                t->newest_sent_at = std::max(
                                    t->newest_sent_at,
                                    absl::FromUnixSeconds(p.outbox().sent_at().seconds()) +
                                        absl::Nanoseconds(p.outbox().sent_at().nanos()));
                                break;
                              case payment::v1::SENDING: ++t->sending; break;
                              case payment::v1::FAILED: ++t->failed; break;
                              default: break;
                            }
                            if (p.outbox().attempts() > 1) ++t->retried;
                            t->max_attempts = std::max(t->max_attempts, p.outbox().attempts());
                          });
    });
  };
  auto missing = [&](const Tally& t) {
    int64_t n = 0;
    for (const std::string& id : acked) n += t.in_db.count(id) == 0 ? 1 : 0;
    return n;
  };
  const std::string set_name = report_all ? "all payments in payment.db"
                               : !creating ? "payments of --expect_ids"
                               : n_expected_new > 0 ? "this run's payments + --expect_ids"
                                                    : "this run's payments";

  if (!wait_sent) {
    // Create only (or look only): one line about the set's outbox, then exit.
    if (creating) {
      std::printf("outbox_demo: created %lld / %lld payments in %.2f s (%.0f/s)",
                  static_cast<long long>(n_created), static_cast<long long>(wanted),
                  absl::ToDoubleSeconds(create_elapsed),
                  n_created / std::max(1e-9, absl::ToDoubleSeconds(create_elapsed)));
      if (retry) {
        std::printf(", %lld calls retried, %lld given up", static_cast<long long>(stats.retries),
                    static_cast<long long>(stats.failed));
      }
      std::printf("\n");
      std::fflush(stdout);  // scripts watch for this line while the snapshot runs
      if (checks) {
        std::printf("outbox_demo: replays ok %d / %d, key reuse rejected %s, invalid rejected %d / %zu\n",
                    replays_ok, replays, reuse_rejected ? "yes" : "NO", invalid_rejected,
                    invalid.size());
      }
    }
    Tally t;
    if (!tally(&t)) return 1;
    std::printf("outbox_demo: %s: %lld, SENDING %lld, SENT %lld, FAILED %lld, not found %lld; "
                "attempts > 1: %lld, most attempts %d\n",
                set_name.c_str(), static_cast<long long>(report_all ? t.seen : set.size()),
                static_cast<long long>(t.sending), static_cast<long long>(t.sent),
                static_cast<long long>(t.failed), static_cast<long long>(missing(t)),
                static_cast<long long>(t.retried), t.max_attempts);
    return create_ok && checks_ok ? 0 : 1;
  }

  // 4. Wait until none of the set is SENDING (listing only SENDING rows keeps
  //    each poll proportional to the backlog, not the table).
  auto accounting = AccountingService::NewStub(NewChannel(accounting_addr));
  const absl::Time wait_deadline = absl::Now() + timeout;
  absl::Time drained_at = absl::InfiniteFuture();
  while (true) {
    int64_t sending = 0;
    bool ok = ListPayments(*payments, payment::v1::SENDING, [&](const payment::v1::Payment& p) {
      if (in_set(p.payment_id()) && p.outbox().status() == payment::v1::SENDING) ++sending;
    });
    if (ok && sending == 0) {
      drained_at = absl::Now();
      break;
    }
    if (absl::Now() > wait_deadline) break;
    absl::SleepFor(absl::Milliseconds(200));
  }

  // 5. Final tally of the set, all statuses.
  Tally t;
  const bool listed = tally(&t);
  const int64_t not_in_db = missing(t);

  // 6. Vouchers: exactly one per payment, matching it.
  std::unordered_map<std::string, int> vouchers_per_payment;
  int64_t vouchers = 0, mismatched = 0, orphans = 0;
  const bool vouchers_listed = ListWithRetries(
      [&] { vouchers_per_payment.clear(); vouchers = mismatched = orphans = 0; },
      [&] {
        return ForEachPage([&](const std::string& token, std::string* next) {
          grpc::ClientContext ctx;
          SetDeadline(&ctx, kCallTimeout);
          accounting::v1::ListVouchersRequest req;
          req.set_page_size(kPageSize);
          req.set_page_token(token);
          accounting::v1::ListVouchersResponse resp;
          grpc::Status s = accounting->ListVouchers(&ctx, req, &resp);
          if (!s.ok()) return s;
          for (const auto& v : resp.vouchers()) {
            auto it = set.find(v.payment_id());
            if (it == set.end() || (report_all && t.in_db.count(v.payment_id()) == 0)) {
              if (report_all) ++orphans;  // a voucher whose payment does not exist
              continue;
            }
            ++vouchers;
            ++vouchers_per_payment[v.payment_id()];
            if (!VoucherMatches(v, it->second)) ++mismatched;
          }
          *next = resp.next_page_token();
          return s;
        });
      });
  int64_t duplicates = 0, without_voucher = 0;
  for (const std::string& id : t.in_db) {
    auto it = vouchers_per_payment.find(id);
    const int n = it == vouchers_per_payment.end() ? 0 : it->second;
    if (n > 1) ++duplicates;
    if (n == 0) ++without_voucher;
  }
  const int64_t lost = not_in_db + without_voucher;
  // GetVoucher on a few, to exercise the point lookup too.
  int get_checked = 0, get_ok = 0;
  for (const std::string& id : t.in_db) {
    if (get_checked == kMaxReplays) break;
    ++get_checked;
    grpc::ClientContext ctx;
    SetDeadline(&ctx, kCallTimeout);
    accounting::v1::GetVoucherRequest req;
    req.set_payment_id(id);
    accounting::v1::Voucher v;
    if (accounting->GetVoucher(&ctx, req, &v).ok() && v.payment_id() == id &&
        VoucherMatches(v, set[id])) {
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
  const int64_t set_size = report_all ? t.seen : static_cast<int64_t>(set.size());
  const bool ok = create_ok && checks_ok && listed && vouchers_listed && not_in_db == 0 &&
                  t.sent == t.seen && vouchers == t.seen && duplicates == 0 &&
                  without_voucher == 0 && mismatched == 0 && orphans == 0 &&
                  get_ok == get_checked;

  std::printf("\n=== outbox demo report (%s) ===\n",
              creating ? absl::StrCat("run ", run_id).c_str() : set_name.c_str());
  if (creating) {
    std::printf("payments created       %lld / %lld\n", static_cast<long long>(n_created),
                static_cast<long long>(wanted));
    std::printf("create latency         p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", pct(0.5),
                pct(0.99), pct(1.0));
    if (retry) {
      std::printf("create retries         %lld calls retried, %lld payments given up\n",
                  static_cast<long long>(stats.retries), static_cast<long long>(stats.failed));
    }
  }
  if (checks) {
    std::printf("replays ok             %d / %d\n", replays_ok, replays);
    std::printf("key reuse rejected     %s\n", reuse_rejected ? "yes" : "NO");
    std::printf("invalid rejected       %d / %zu\n", invalid_rejected, invalid.size());
  }
  if (report_all || n_expected_new > 0) {
    std::printf("payments checked       %lld (%s)\n", static_cast<long long>(set_size),
                set_name.c_str());
  }
  if (n_expected_new > 0) {
    std::printf("acknowledged earlier   %lld (--expect_ids)\n",
                static_cast<long long>(expected_ids.size()));
  }
  std::printf("outbox SENT            %lld\n", static_cast<long long>(t.sent));
  std::printf("outbox SENDING         %lld\n", static_cast<long long>(t.sending));
  std::printf("outbox FAILED          %lld\n", static_cast<long long>(t.failed));
  std::printf("rows not found         %lld (acknowledged to the client, missing in payment.db)\n",
              static_cast<long long>(not_in_db));
  std::printf("attempts > 1           %lld (re-published by recovery; most attempts %d)\n",
              static_cast<long long>(t.retried), t.max_attempts);
  std::printf("vouchers               %lld\n", static_cast<long long>(vouchers));
  std::printf("duplicates             %lld (payments with more than one voucher)\n",
              static_cast<long long>(duplicates));
  std::printf("without voucher        %lld\n", static_cast<long long>(without_voucher));
  if (report_all) {
    std::printf("orphan vouchers        %lld (voucher, but no such payment)\n",
                static_cast<long long>(orphans));
  }
  std::printf("voucher mismatches     %lld (+ GetVoucher %d / %d ok)\n",
              static_cast<long long>(mismatched), get_ok, get_checked);
  std::printf("lost                   %lld (rows not found + without voucher)\n",
              static_cast<long long>(lost));
  if (creating) {
    std::printf("create phase           %.2f s (%.0f payments/s)\n", create_s,
                create_s > 0 ? n_created / create_s : 0.0);
    std::printf("all SENT after         %s%.2f s (%.0f payments/s end to end)\n",
                drained ? "" : "NOT DRAINED, gave up at ", e2e_s,
                e2e_s > 0 ? t.sent / e2e_s : 0.0);
  } else {
    std::printf("all SENT after         %s%.2f s (since this program started)\n",
                drained ? "" : "NOT DRAINED, gave up at ",
                absl::ToDoubleSeconds((drained ? drained_at : absl::Now()) - program_start));
  }
  if (t.sent > 0) {
    std::printf("newest sent_at         %s\n",
                absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t.newest_sent_at, absl::UTCTimeZone())
                    .c_str());
  }
  std::printf("RESULT                 %s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
