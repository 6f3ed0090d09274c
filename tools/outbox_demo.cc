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
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "accounting/v1/accounting.grpc.pb.h"
#include "client/channel.h"
#include "client/create_load.h"
#include "client/listing.h"
#include "client/percentiles.h"
#include "client/request.h"
#include "client/retry.h"
#include "client/sharded_payment_stub.h"
#include "payment/v1/payment.grpc.pb.h"

// The security flags take their defaults from the environment, as the
// services' do, so a secret's path need not be on the command line.
static std::string EnvOrEmpty(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

ABSL_FLAG(std::string, payment_addr, "127.0.0.1:50051",
          "payment_service address (host:port); payment shards: every shard's, comma-separated "
          "by shard index (each call goes to its key's or payment id's shard)");
ABSL_FLAG(std::string, accounting_addr, "127.0.0.1:50052",
          "accounting_service address (host:port)");
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
ABSL_FLAG(std::string, tls_ca_file, EnvOrEmpty("TLS_CA_FILE"),
          "PEM CA the services' certificates chain to; set = TLS [env TLS_CA_FILE]");
ABSL_FLAG(std::string, tls_cert_file, EnvOrEmpty("TLS_CLIENT_CERT_FILE"),
          "PEM client certificate for services that require one (mTLS) [env TLS_CLIENT_CERT_FILE]");
ABSL_FLAG(std::string, tls_key_file, EnvOrEmpty("TLS_CLIENT_KEY_FILE"),
          "PEM key of --tls_cert_file [env TLS_CLIENT_KEY_FILE]");
ABSL_FLAG(std::string, token_file, EnvOrEmpty("API_TOKEN_FILE"),
          "file with the API token sent as 'authorization: Bearer' [env API_TOKEN_FILE]");

namespace {

namespace client = outbox::client;
using accounting::v1::AccountingService;
using client::Created;
using client::RetryPolicy;
using payment::v1::CreatePaymentRequest;
using payment::v1::CreatePaymentResponse;
using payment::v1::PaymentService;

constexpr int kMaxReplays = 5;
constexpr int kMaxCreateFailures = 20;
constexpr int kListAttempts = 5;
constexpr absl::Duration kCallTimeout = absl::Seconds(10);
constexpr char kDescription[] = "outbox demo payment";

// The flags, read once.
struct Config {
  std::vector<std::string> payment_addrs;  // one per payment shard
  std::string accounting_addr;
  absl::Duration duration, timeout;
  bool by_time = false;   // --duration > 0
  int64_t count = 0;      // payments to create (0 when by_time)
  bool creating = false;  // this run creates payments
  int concurrency = 1;
  bool retry = false, checks = false, wait_sent = true, report_all = false;
  int wait_healthy = 0;
  std::string write_ids;
  std::vector<std::string> expected_ids;  // of --expect_ids
  client::ChannelSecurity security;       // --tls_*, --token_file
};

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

absl::StatusOr<Config> ReadFlags() {
  Config c;
  c.payment_addrs = client::SplitAddresses(absl::GetFlag(FLAGS_payment_addr));
  if (c.payment_addrs.empty()) return absl::InvalidArgumentError("--payment_addr is empty");
  c.accounting_addr = absl::GetFlag(FLAGS_accounting_addr);
  absl::StatusOr<client::ChannelSecurity> security = client::ChannelSecurity::FromFiles(
      {absl::GetFlag(FLAGS_tls_ca_file), absl::GetFlag(FLAGS_tls_cert_file),
       absl::GetFlag(FLAGS_tls_key_file)},
      absl::GetFlag(FLAGS_token_file));
  if (!security.ok()) return security.status();
  c.security = *std::move(security);
  c.duration = absl::GetFlag(FLAGS_duration);
  c.by_time = c.duration > absl::ZeroDuration();
  c.count = c.by_time ? 0 : std::max(0, absl::GetFlag(FLAGS_count));
  c.creating = c.by_time || c.count > 0;
  c.concurrency = std::max(1, absl::GetFlag(FLAGS_concurrency));
  c.timeout = absl::GetFlag(FLAGS_timeout);
  c.retry = absl::GetFlag(FLAGS_retry);
  c.checks = c.creating && !absl::GetFlag(FLAGS_skip_checks);
  c.wait_sent = absl::GetFlag(FLAGS_wait_sent);
  c.report_all = absl::GetFlag(FLAGS_report_all);
  c.wait_healthy = absl::GetFlag(FLAGS_wait_healthy);
  c.write_ids = absl::GetFlag(FLAGS_write_ids);
  const std::string expect_ids = absl::GetFlag(FLAGS_expect_ids);
  if (!expect_ids.empty() && !ReadIds(expect_ids, &c.expected_ids)) {
    return absl::NotFoundError(absl::StrCat("cannot read --expect_ids=", expect_ids));
  }
  return c;
}

// A few quick tries on UNAVAILABLE and DEADLINE_EXCEEDED: the service may be
// briefly away. Also the checks' policy, so a refusal comes back at once.
RetryPolicy FewTries() {
  RetryPolicy p;
  p.max_attempts = 5;
  p.first_backoff = absl::Milliseconds(100);
  p.call_timeout = kCallTimeout;
  return p;
}

// --retry: every error but a permanent one, until --timeout.
RetryPolicy UntilTimeout(absl::Duration timeout) {
  RetryPolicy p;
  p.max_attempts = 0;
  p.retry_for = timeout;
  p.retry_unknown = true;
  p.first_backoff = absl::Milliseconds(50);
  p.call_timeout = kCallTimeout;
  return p;
}

// Step 1: the payments this run creates.
struct CreatePhase {
  std::vector<Created> created;  // every payment tried, in index order
  int64_t wanted = 0;
  int64_t n_created = 0;
  int64_t failed = 0;   // payments given up on
  int64_t retries = 0;  // extra CreatePayment calls
  absl::Duration elapsed;
  std::vector<double> latency_ms;  // of the created ones
};

CreatePhase CreatePayments(const Config& c, const std::string& run_id, absl::Time start) {
  std::vector<std::unique_ptr<PaymentService::StubInterface>> stubs;
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
  client::CreateLoad load(std::move(stubs), plan, [](const Created& r) {
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
  for (const Created& r : out.created) {
    if (r.status.ok()) out.latency_ms.push_back(absl::ToDoubleMilliseconds(r.latency));
  }
  if (!c.retry && out.failed >= kMaxCreateFailures) {
    std::fprintf(stderr, "outbox_demo: gave up creating after %lld failures\n",
                 static_cast<long long>(out.failed));
  }
  return out;
}

// Requests that must be rejected with INVALID_ARGUMENT.
std::vector<std::pair<std::string, CreatePaymentRequest>> InvalidRequests(
    const std::string& run_id) {
  std::vector<std::pair<std::string, CreatePaymentRequest>> out;
  auto add = [&](const std::string& what, const std::function<void(CreatePaymentRequest&)>& f) {
    CreatePaymentRequest r =
        client::PaymentRequest(client::KeyPrefix("demo", run_id), 0, kDescription);
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

// The API's promises: a replay returns the same payment, a reused key with
// another request is refused, bad input is INVALID_ARGUMENT.
struct Checks {
  int replays = 0, replays_ok = 0;
  bool reuse_rejected = true;
  int invalid_rejected = 0;
  size_t invalid = 0;
  bool ok() const {
    return replays_ok == replays && reuse_rejected && invalid_rejected == static_cast<int>(invalid);
  }
};

Checks RunChecks(PaymentService::StubInterface& stub, const std::vector<Created>& created,
                 const std::string& run_id) {
  Checks out;
  auto create = [&](const CreatePaymentRequest& req, CreatePaymentResponse* resp) {
    return client::CreateWithRetries(stub, req, FewTries(), resp);
  };
  // Same key and request -> same payment, replayed=true.
  for (size_t i = 0; i < created.size() && out.replays < kMaxReplays; ++i) {
    if (created[i].payment_id.empty()) continue;
    ++out.replays;
    CreatePaymentResponse resp;
    grpc::Status s = create(created[i].request, &resp);
    if (s.ok() && resp.replayed() && resp.payment().payment_id() == created[i].payment_id) {
      ++out.replays_ok;
    } else {
      std::fprintf(stderr, "outbox_demo: replay of %zu: status %d replayed=%d id=%s\n", i,
                   static_cast<int>(s.error_code()), resp.replayed(),
                   resp.payment().payment_id().c_str());
    }
  }
  // Same key, different request -> rejected.
  if (!created.empty() && !created[0].payment_id.empty()) {
    CreatePaymentRequest changed = created[0].request;
    changed.set_amount_minor(changed.amount_minor() + 1);
    CreatePaymentResponse resp;
    grpc::Status s = create(changed, &resp);
    out.reuse_rejected = s.error_code() == grpc::StatusCode::ALREADY_EXISTS ||
                         s.error_code() == grpc::StatusCode::FAILED_PRECONDITION;
    if (!out.reuse_rejected) {
      std::fprintf(stderr, "outbox_demo: key reuse with another amount got status %d\n",
                   static_cast<int>(s.error_code()));
    }
  }
  // Invalid requests -> INVALID_ARGUMENT.
  const auto invalid = InvalidRequests(run_id);
  out.invalid = invalid.size();
  for (const auto& [what, req] : invalid) {
    CreatePaymentResponse resp;
    grpc::Status s = create(req, &resp);
    if (s.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      ++out.invalid_rejected;
    } else {
      std::fprintf(stderr, "outbox_demo: invalid request (%s) got status %d\n", what.c_str(),
                   static_cast<int>(s.error_code()));
    }
  }
  return out;
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

// Step 3, the set: payment_id -> what its voucher must say. `acked` are the
// ids a client was given (here or in --expect_ids): each must be in payment.db.
struct PaymentSet {
  bool all = false;  // --report_all: every payment in payment.db
  std::unordered_map<std::string, Expected> expected;
  std::unordered_set<std::string> acked;
  int64_t expected_new = 0;  // --expect_ids not created by this run

  bool Contains(const std::string& id) const { return all || expected.count(id) != 0; }
};

PaymentSet BuildSet(const Config& c, const std::vector<Created>& created) {
  PaymentSet set;
  set.all = c.report_all;
  for (const Created& r : created) {
    if (r.payment_id.empty()) continue;
    set.expected.emplace(r.payment_id, FromRequest(r.request));
    set.acked.insert(r.payment_id);
  }
  for (const std::string& id : c.expected_ids) {
    if (set.acked.insert(id).second) {
      ++set.expected_new;
      set.expected.emplace(id, Expected{});
    }
  }
  return set;
}

std::string SetName(const Config& c, const PaymentSet& set) {
  return c.report_all           ? "all payments in payment.db"
         : !c.creating          ? "payments of --expect_ids"
         : set.expected_new > 0 ? "this run's payments + --expect_ids"
                                : "this run's payments";
}

// Runs a whole listing (`reset` then `list`) up to kListAttempts times, so a
// service that is just restarting does not spoil the report.
bool ListWithRetries(const std::function<void()>& reset,
                     const std::function<absl::Status()>& list) {
  for (int attempt = 1; attempt <= kListAttempts; ++attempt) {
    reset();
    absl::Status s = list();
    if (s.ok()) return true;
    std::fprintf(stderr, "outbox_demo: list failed: %s\n", std::string(s.message()).c_str());
    if (attempt < kListAttempts) absl::SleepFor(absl::Seconds(1));
  }
  return false;
}

// Outbox tally of the set.
struct Tally {
  int64_t seen = 0, sent = 0, sending = 0, failed = 0, retried = 0;
  int max_attempts = 0;
  absl::Time newest_sent_at = absl::InfinitePast();
  std::unordered_set<std::string> in_db;  // ids of the set found in payment.db

  void Add(const payment::v1::Payment& p) {
    ++seen;
    in_db.insert(p.payment_id());
    switch (p.outbox().status()) {
      case payment::v1::SENT:
        ++sent;
        newest_sent_at =
            std::max(newest_sent_at, absl::FromUnixSeconds(p.outbox().sent_at().seconds()) +
                                         absl::Nanoseconds(p.outbox().sent_at().nanos()));
        break;
      case payment::v1::SENDING: ++sending; break;
      case payment::v1::FAILED: ++failed; break;
      default: break;
    }
    if (p.outbox().attempts() > 1) ++retried;
    max_attempts = std::max(max_attempts, p.outbox().attempts());
  }

  int64_t Missing(const PaymentSet& set) const {
    int64_t n = 0;
    for (const std::string& id : set.acked) n += in_db.count(id) == 0 ? 1 : 0;
    return n;
  }
};

// Lists every payment and tallies the set's; also learns what an
// --expect_ids payment's voucher must say.
bool TallySet(PaymentService::StubInterface& stub, PaymentSet& set, Tally* t) {
  auto list = [&] {
    return client::ForEachPayment(stub, payment::v1::OUTBOX_STATUS_UNSPECIFIED, kCallTimeout,
                                  [&](const payment::v1::Payment& p) {
                                    if (!set.Contains(p.payment_id())) return;
                                    Expected& e = set.expected[p.payment_id()];
                                    if (!e.known) e = FromPayment(p);
                                    t->Add(p);
                                  });
  };
  return ListWithRetries([&] { *t = Tally{}; }, list);
}

// Vouchers of the set: exactly one per payment, matching it.
struct VoucherAudit {
  bool listed = false;
  int64_t vouchers = 0, mismatched = 0, orphans = 0, duplicates = 0, without_voucher = 0;
  int get_checked = 0, get_ok = 0;  // GetVoucher on a few
};

VoucherAudit AuditVouchers(AccountingService::Stub& stub, const PaymentSet& set, const Tally& t) {
  VoucherAudit a;
  std::unordered_map<std::string, int> vouchers_per_payment;
  a.listed = ListWithRetries(
      [&] {
        vouchers_per_payment.clear();
        a.vouchers = a.mismatched = a.orphans = 0;
      },
      [&] {
        return client::ForEachVoucher(stub, kCallTimeout, [&](const accounting::v1::Voucher& v) {
          auto it = set.expected.find(v.payment_id());
          if (it == set.expected.end() || (set.all && t.in_db.count(v.payment_id()) == 0)) {
            if (set.all) ++a.orphans;  // a voucher whose payment does not exist
            return;
          }
          ++a.vouchers;
          ++vouchers_per_payment[v.payment_id()];
          if (!VoucherMatches(v, it->second)) ++a.mismatched;
        });
      });
  for (const std::string& id : t.in_db) {
    auto it = vouchers_per_payment.find(id);
    const int n = it == vouchers_per_payment.end() ? 0 : it->second;
    if (n > 1) ++a.duplicates;
    if (n == 0) ++a.without_voucher;
  }
  // GetVoucher on a few, to exercise the point lookup too.
  for (const std::string& id : t.in_db) {
    if (a.get_checked == kMaxReplays) break;
    ++a.get_checked;
    grpc::ClientContext ctx;
    client::SetTimeout(&ctx, kCallTimeout);
    accounting::v1::GetVoucherRequest req;
    req.set_payment_id(id);
    accounting::v1::Voucher v;
    auto e = set.expected.find(id);
    if (stub.GetVoucher(&ctx, req, &v).ok() && v.payment_id() == id && e != set.expected.end() &&
        VoucherMatches(v, e->second)) {
      ++a.get_ok;
    }
  }
  return a;
}

// --wait_sent=false: what was created (if anything), then one line about the
// set's outbox. The exit status.
int PrintSnapshot(const Config& c, const CreatePhase& create, const Checks& checks, bool create_ok,
                  PaymentService::StubInterface& stub, PaymentSet& set) {
  if (c.creating) {
    const double create_s = absl::ToDoubleSeconds(create.elapsed);
    std::printf("outbox_demo: created %lld / %lld payments in %.2f s (%.0f/s)",
                static_cast<long long>(create.n_created), static_cast<long long>(create.wanted),
                create_s, create.n_created / std::max(1e-9, create_s));
    if (c.retry) {
      std::printf(", %lld calls retried, %lld given up", static_cast<long long>(create.retries),
                  static_cast<long long>(create.failed));
    }
    std::printf("\n");
    std::fflush(stdout);  // scripts watch for this line while the snapshot runs
    if (c.checks) {
      std::printf(
          "outbox_demo: replays ok %d / %d, key reuse rejected %s, invalid rejected %d / %zu\n",
          checks.replays_ok, checks.replays, checks.reuse_rejected ? "yes" : "NO",
          checks.invalid_rejected, checks.invalid);
    }
  }
  Tally t;
  if (!TallySet(stub, set, &t)) return 1;
  std::printf(
      "outbox_demo: %s: %lld, SENDING %lld, SENT %lld, FAILED %lld, not found %lld; "
      "attempts > 1: %lld, most attempts %d\n",
      SetName(c, set).c_str(),
      static_cast<long long>(c.report_all ? t.seen : static_cast<int64_t>(set.expected.size())),
      static_cast<long long>(t.sending), static_cast<long long>(t.sent),
      static_cast<long long>(t.failed), static_cast<long long>(t.Missing(set)),
      static_cast<long long>(t.retried), t.max_attempts);
  return create_ok && (!c.checks || checks.ok()) ? 0 : 1;
}

// Everything the final report says.
struct Outcome {
  std::string run_id;
  absl::Time program_start, start;
  absl::Time drained_at = absl::InfiniteFuture();  // none of the set SENDING any more
  bool create_ok = false, listed = false;
  Tally tally;
  VoucherAudit vouchers;
};

// The report scripts/demo.sh and scripts/chaos.sh read; true if all is well.
bool PrintReport(const Config& c, const CreatePhase& create, const Checks& checks,
                 const PaymentSet& set, const Outcome& o) {
  const Tally& t = o.tally;
  const VoucherAudit& v = o.vouchers;
  const int64_t not_in_db = t.Missing(set);
  const int64_t lost = not_in_db + v.without_voucher;
  const client::Percentiles latency = client::Summarize(create.latency_ms);
  auto ms = [](double x) { return std::isnan(x) ? 0.0 : x; };
  const double create_s = absl::ToDoubleSeconds(create.elapsed);
  const bool drained = o.drained_at != absl::InfiniteFuture();
  const absl::Time end = drained ? o.drained_at : absl::Now();
  const double e2e_s = absl::ToDoubleSeconds(end - o.start);
  const std::string set_name = SetName(c, set);
  const int64_t set_size = c.report_all ? t.seen : static_cast<int64_t>(set.expected.size());
  const bool ok = o.create_ok && (!c.checks || checks.ok()) && o.listed && v.listed &&
                  not_in_db == 0 && t.sent == t.seen && v.vouchers == t.seen && v.duplicates == 0 &&
                  v.without_voucher == 0 && v.mismatched == 0 && v.orphans == 0 &&
                  v.get_ok == v.get_checked;

  std::printf("\n=== outbox demo report (%s) ===\n",
              c.creating ? absl::StrCat("run ", o.run_id).c_str() : set_name.c_str());
  if (c.creating) {
    std::printf("payments created       %lld / %lld\n", static_cast<long long>(create.n_created),
                static_cast<long long>(create.wanted));
    std::printf("create latency         p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", ms(latency.p50),
                ms(latency.p99), ms(latency.max));
    if (c.retry) {
      std::printf("create retries         %lld calls retried, %lld payments given up\n",
                  static_cast<long long>(create.retries), static_cast<long long>(create.failed));
    }
  }
  if (c.checks) {
    std::printf("replays ok             %d / %d\n", checks.replays_ok, checks.replays);
    std::printf("key reuse rejected     %s\n", checks.reuse_rejected ? "yes" : "NO");
    std::printf("invalid rejected       %d / %zu\n", checks.invalid_rejected, checks.invalid);
  }
  if (c.report_all || set.expected_new > 0) {
    std::printf("payments checked       %lld (%s)\n", static_cast<long long>(set_size),
                set_name.c_str());
  }
  if (set.expected_new > 0) {
    std::printf("acknowledged earlier   %lld (--expect_ids)\n",
                static_cast<long long>(c.expected_ids.size()));
  }
  std::printf("outbox SENT            %lld\n", static_cast<long long>(t.sent));
  std::printf("outbox SENDING         %lld\n", static_cast<long long>(t.sending));
  std::printf("outbox FAILED          %lld\n", static_cast<long long>(t.failed));
  std::printf("rows not found         %lld (acknowledged to the client, missing in payment.db)\n",
              static_cast<long long>(not_in_db));
  std::printf("attempts > 1           %lld (re-published by recovery; most attempts %d)\n",
              static_cast<long long>(t.retried), t.max_attempts);
  std::printf("vouchers               %lld\n", static_cast<long long>(v.vouchers));
  std::printf("duplicates             %lld (payments with more than one voucher)\n",
              static_cast<long long>(v.duplicates));
  std::printf("without voucher        %lld\n", static_cast<long long>(v.without_voucher));
  if (c.report_all) {
    std::printf("orphan vouchers        %lld (voucher, but no such payment)\n",
                static_cast<long long>(v.orphans));
  }
  std::printf("voucher mismatches     %lld (+ GetVoucher %d / %d ok)\n",
              static_cast<long long>(v.mismatched), v.get_ok, v.get_checked);
  std::printf("lost                   %lld (rows not found + without voucher)\n",
              static_cast<long long>(lost));
  if (c.creating) {
    std::printf("create phase           %.2f s (%.0f payments/s)\n", create_s,
                create_s > 0 ? create.n_created / create_s : 0.0);
    std::printf("all SENT after         %s%.2f s (%.0f payments/s end to end)\n",
                drained ? "" : "NOT DRAINED, gave up at ", e2e_s, e2e_s > 0 ? t.sent / e2e_s : 0.0);
  } else {
    std::printf("all SENT after         %s%.2f s (since this program started)\n",
                drained ? "" : "NOT DRAINED, gave up at ",
                absl::ToDoubleSeconds(end - o.program_start));
  }
  if (t.sent > 0) {
    std::printf(
        "newest sent_at         %s\n",
        absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t.newest_sent_at, absl::UTCTimeZone()).c_str());
  }
  std::printf("RESULT                 %s\n", ok ? "OK" : "FAILED");
  return ok;
}

// --wait_healthy: payment_service, and accounting_service if this run waits
// for SENT, report SERVING in time.
bool WaitHealthy(const Config& c) {
  if (c.wait_healthy <= 0) return true;
  const absl::Time deadline = absl::Now() + absl::Seconds(c.wait_healthy);
  std::vector<std::string> addrs = c.payment_addrs;
  if (c.wait_sent) addrs.push_back(c.accounting_addr);
  for (const std::string& addr : addrs) {
    absl::Status s = client::WaitHealthy(addr, deadline, c.security);
    if (!s.ok()) {
      std::fprintf(stderr, "outbox_demo: %s\n", std::string(s.message()).c_str());
      return false;
    }
  }
  return true;
}

int Run(const Config& c) {
  Outcome o;
  o.program_start = absl::Now();
  if (!WaitHealthy(c)) return 2;
  auto payments = client::NewPaymentStub(c.payment_addrs, c.security);
  o.run_id = client::RandomRunId();
  if (c.creating) {
    const std::string what =
        c.by_time ? absl::StrCat("new payments for ", absl::FormatDuration(c.duration))
                  : absl::StrCat(c.count, " payments");
    std::printf("outbox_demo: run %s, %s, %d client threads%s\n", o.run_id.c_str(), what.c_str(),
                c.concurrency, c.retry ? ", retrying failed creates" : "");
    std::fflush(stdout);
  }

  // 1. Create, then check the API's promises.
  o.start = absl::Now();
  CreatePhase create;
  if (c.creating) create = CreatePayments(c, o.run_id, o.start);
  create.elapsed = absl::Now() - o.start;
  PaymentSet set = BuildSet(c, create.created);
  if (!c.write_ids.empty() && !WriteIds(c.write_ids, create.created)) {
    std::fprintf(stderr, "outbox_demo: cannot write --write_ids=%s\n", c.write_ids.c_str());
  }
  const Checks checks = c.checks ? RunChecks(*payments, create.created, o.run_id) : Checks{};
  o.create_ok = c.by_time ? create.failed == 0 : create.n_created == c.count;
  if (!c.wait_sent) return PrintSnapshot(c, create, checks, o.create_ok, *payments, set);

  // 2. Wait until none of the set is SENDING, then tally it and its vouchers.
  auto accounting = AccountingService::NewStub(client::NewChannel(c.accounting_addr, c.security));
  if (client::AwaitNoneSending(
          *payments, [&](const std::string& id) { return set.Contains(id); },
          absl::Now() + c.timeout, kCallTimeout)) {
    o.drained_at = absl::Now();
  }
  o.listed = TallySet(*payments, set, &o.tally);
  o.vouchers = AuditVouchers(*accounting, set, o.tally);
  return PrintReport(c, create, checks, set, o) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<Config> config = ReadFlags();
  if (!config.ok()) {
    std::fprintf(stderr, "outbox_demo: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  return Run(*config);
}
