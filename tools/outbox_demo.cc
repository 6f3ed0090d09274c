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
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "accounting/v1/accounting.grpc.pb.h"
#include "client/channel.h"
#include "client/listing.h"
#include "client/request.h"
#include "client/sharded_payment_stub.h"
#include "tools/demo/api_checks.h"
#include "tools/demo/create_payments.h"
#include "tools/demo/demo_config.h"
#include "tools/demo/id_files.h"
#include "tools/demo/payment_set.h"
#include "tools/demo/report.h"
#include "tools/demo/voucher_audit.h"

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

namespace outbox::demo {
namespace {

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

void PrintRunStart(const Config& c, const std::string& run_id) {
  const std::string what = c.by_time
                               ? absl::StrCat("new payments for ", absl::FormatDuration(c.duration))
                               : absl::StrCat(c.count, " payments");
  std::printf("outbox_demo: run %s, %s, %d client threads%s\n", run_id.c_str(), what.c_str(),
              c.concurrency, c.retry ? ", retrying failed creates" : "");
  std::fflush(stdout);
}

int Run(const Config& c) {
  Outcome o;
  o.program_start = absl::Now();
  if (!WaitHealthy(c)) return 2;
  auto payments = client::NewPaymentStub(c.payment_addrs, c.security);
  o.run_id = client::RandomRunId();
  if (c.creating) PrintRunStart(c, o.run_id);

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
  auto accounting =
      accounting::v1::AccountingService::NewStub(client::NewChannel(c.accounting_addr, c.security));
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
}  // namespace outbox::demo

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::StatusOr<outbox::demo::Config> config = outbox::demo::ReadFlags();
  if (!config.ok()) {
    std::fprintf(stderr, "outbox_demo: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  return outbox::demo::Run(*config);
}
