// outbox_bench: drives payment_service's CreatePayment over real gRPC, closed
// loop (a fixed number of calls in flight) or open loop (a fixed offered
// rate), waits until every payment is SENT, and reports throughput, latency
// to SENT and, the figure that machine noise cannot fool, the CPU time each
// process spent per payment over the whole run.
//
// With --baselines it first measures, on the same machine and in the same
// run, what the parts underneath can do on their own and what one unit of
// their work costs in CPU (bench/baselines.h); the system's figures are also
// printed as ratios to those.
//
// With --floor_rate=R it drives no services: it measures each part alone,
// paced at R per second, and the CPU floor of a payment they compose at that
// rate (bench/floor.h).
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/baselines.h"
#include "bench/broker_traffic.h"
#include "bench/create_driver.h"
#include "bench/floor.h"
#include "bench/process_stats.h"
#include "bench/report.h"
#include "bench/sent.h"
#include "bench/trivial_server.h"
#include "client/channel.h"
#include "client/percentiles.h"
#include "client/request.h"
#include "client/sharded_payment_stub.h"
#include "payment/v1/payment.grpc.pb.h"
#include "shared/amqp/internal/amqp_client.h"
#include "shared/base/status_macros.h"
#include "shared/runtime/internal/env.h"

ABSL_FLAG(std::string, payment_addr, "",
          "payment_service gRPC address host:port (required); payment shards: every shard's, "
          "comma-separated by shard index (calls go to their key's shard)");
ABSL_FLAG(std::string, accounting_addr, "",
          "accounting_service gRPC address; if set, vouchers are counted against SENT payments; "
          "with accounting shards every shard's, comma-separated (their vouchers add up)");
ABSL_FLAG(int, concurrency, 64, "closed loop: CreatePayment calls kept in flight");
ABSL_FLAG(double, rate, 0,
          "open loop: CreatePayment calls offered per second (0 = closed loop at --concurrency)");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(20), "measured drive phase");
ABSL_FLAG(absl::Duration, warmup, absl::Seconds(3), "drive phase before the measured one");
ABSL_FLAG(absl::Duration, drain_timeout, absl::Seconds(60),
          "after driving, how long to wait for every payment to reach SENT");
ABSL_FLAG(int, channels, 4, "gRPC channels (TCP connections) the calls are spread over");
ABSL_FLAG(int, max_in_flight, 20000,
          "open loop: calls not sent (counted as skipped) while this many are in flight");
ABSL_FLAG(int, payment_pid, 0,
          "payment_service pid, for its peak RSS (VmHWM) and CPU (with shards: shard 0's)");
ABSL_FLAG(int, accounting_pid, 0, "accounting_service pid, for its peak RSS (VmHWM)");
ABSL_FLAG(std::string, other_payment_pids, "",
          "payment shards 1..N-1: their pids, comma-separated, for their CPU share");
ABSL_FLAG(std::string, more_accounting_pids, "",
          "with accounting shards, the pids of shards 1..M-1, comma-separated (CPU each, peak "
          "RSS the largest)");
ABSL_FLAG(int, broker_pid, 0,
          "RabbitMQ node (beam.smp) pid, for its CPU use while measuring and per message in the "
          "broker baseline");
ABSL_FLAG(std::string, payment_metrics, "",
          "payment_service's /metrics host:port (its --metrics_listen): the messages it published "
          "and received, for broker messages per payment");
ABSL_FLAG(bool, baselines, false,
          "first measure raw SQLite, raw broker and naive-outbox rates in this run");
ABSL_FLAG(std::string, amqp_url, "",
          "broker for the baselines and the floor, amqp://user:pass@host:port/vhost or "
          "amqps://...");
ABSL_FLAG(std::string, amqp_tls_ca_file, "", "with amqps://: the CA the broker must chain to");
ABSL_FLAG(std::string, amqp_tls_cert_file, "", "with amqps://: a client certificate (optional)");
ABSL_FLAG(std::string, amqp_tls_key_file, "", "with amqps://: the key of --amqp_tls_cert_file");
ABSL_FLAG(std::string, scratch_dir, "",
          "directory for the SQLite baseline and floor files (default $TMPDIR or /tmp); put it "
          "on the services' filesystem");
ABSL_FLAG(absl::Duration, sqlite_baseline_time, absl::Seconds(3), "time per SQLite baseline");
ABSL_FLAG(absl::Duration, broker_baseline_time, absl::Seconds(5), "time of the broker baseline");
ABSL_FLAG(absl::Duration, grpc_baseline_time, absl::Seconds(3),
          "time of the gRPC baseline (the same client against a trivial server process)");
ABSL_FLAG(absl::Duration, naive_baseline_time, absl::Seconds(3),
          "time of the naive-outbox baseline");
ABSL_FLAG(double, floor_rate, 0,
          "> 0: drive no services; measure each part alone paced at this many per second (gRPC "
          "call to a trivial server, broker message persistent and transient, 2-row SQLite "
          "transaction) and the CPU floor per payment they compose; needs --amqp_url, and "
          "--broker_pid for the broker's CPU");
ABSL_FLAG(absl::Duration, floor_time, absl::Seconds(10), "with --floor_rate: time of each part");
ABSL_FLAG(std::string, label, "", "name of this run, printed in the report");
ABSL_FLAG(std::string, tls_ca_file, outbox::EnvOr("TLS_CA_FILE", ""),
          "PEM CA the services' certificates chain to; set = TLS [env TLS_CA_FILE]");
ABSL_FLAG(std::string, tls_cert_file, outbox::EnvOr("TLS_CLIENT_CERT_FILE", ""),
          "PEM client certificate for services that require one (mTLS) [env TLS_CLIENT_CERT_FILE]");
ABSL_FLAG(std::string, tls_key_file, outbox::EnvOr("TLS_CLIENT_KEY_FILE", ""),
          "PEM key of --tls_cert_file [env TLS_CLIENT_KEY_FILE]");
ABSL_FLAG(std::string, token_file, outbox::EnvOr("API_TOKEN_FILE", ""),
          "file with the API token sent as 'authorization: Bearer' [env API_TOKEN_FILE]");
ABSL_FLAG(bool, json, false, "also print the figures as one JSON object on the last line");
ABSL_FLAG(std::string, ledger, "",
          "file to write the client's ledger to: one line 'payment_id,amount_minor,message_id' "
          "per acknowledged CreatePayment, warm-up included, for checkers that want every id");
ABSL_FLAG(std::string, outage_mark_file, "",
          "drain scenario: whoever stops accounting_service during the drive writes the Unix time "
          "in ms at which it starts it again into this file; after driving, outbox_bench waits "
          "for it (up to --drain_timeout) and reports the backlog at that moment and the rate at "
          "which it drained to SENT");

ABSL_FLAG(bool, serve_trivial_payments, false,
          "internal: be the gRPC baseline's trivial server (port on stdout, until stdin closes)");

namespace outbox::bench {
namespace {

using ::outbox::client::Percentiles;
using ::outbox::client::Summarize;

// Targets, checked in the report.
constexpr double kTargetSustained = 2500;   // payments/s reaching SENT
constexpr double kTargetP99Ms = 50;         // create->SENT p99 at 1,000/s offered
constexpr double kTargetRssMib = 64;        // each service, under that load
constexpr double kTargetDrainPerS = 3000;   // backlog to SENT after an accounting outage
constexpr double kTargetSystemCpuUs = 240;  // payment + accounting + broker, per payment
constexpr double kTargetFloorRatio = 0.8;   // CPU floor / actual
constexpr double kNaiveReference = 400;     // items/s, a naive outbox on a 2-core machine
// Row writes per payment: the payment, its outbox row, the row marked SENT,
// the voucher and the processed message id.
constexpr double kRowsPerPayment = 5;

// The run as the flags describe it, checked.
struct Setup {
  std::string payment_addr;
  double rate = 0;  // > 0: open loop
  int concurrency = 0;
  int channels = 0;
  absl::Duration duration;
  absl::Duration warmup;
  bool open_loop() const { return rate > 0; }
  client::ChannelSecurity security;
  std::string scratch;  // for the SQLite baseline files
};

// --scratch_dir, else $TMPDIR, else /tmp.
std::string ScratchDir() {
  std::string dir = absl::GetFlag(FLAGS_scratch_dir);
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    dir = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp";
  }
  return dir;
}

absl::StatusOr<AmqpUrl> BrokerUrl() {
  return AmqpUrl::Parse(absl::GetFlag(FLAGS_amqp_url), {absl::GetFlag(FLAGS_amqp_tls_ca_file),
                                                        absl::GetFlag(FLAGS_amqp_tls_cert_file),
                                                        absl::GetFlag(FLAGS_amqp_tls_key_file)});
}

absl::StatusOr<Setup> ReadSetup() {
  Setup s;
  s.payment_addr = absl::GetFlag(FLAGS_payment_addr);
  if (s.payment_addr.empty()) return absl::InvalidArgumentError("--payment_addr is required");
  s.rate = absl::GetFlag(FLAGS_rate);
  s.concurrency = absl::GetFlag(FLAGS_concurrency);
  s.duration = absl::GetFlag(FLAGS_duration);
  s.warmup = absl::GetFlag(FLAGS_warmup);
  s.channels = absl::GetFlag(FLAGS_channels);
  if (s.rate < 0 || (!s.open_loop() && s.concurrency < 1) || s.channels < 1 ||
      s.duration <= absl::ZeroDuration() || s.warmup < absl::ZeroDuration() ||
      absl::GetFlag(FLAGS_max_in_flight) < 1) {
    return absl::InvalidArgumentError(
        "--rate must be >= 0; --concurrency, --channels, --max_in_flight and --duration positive; "
        "--warmup not negative");
  }
  if (absl::GetFlag(FLAGS_baselines) && absl::GetFlag(FLAGS_amqp_url).empty()) {
    return absl::InvalidArgumentError("--baselines needs --amqp_url");
  }
  // Plaintext unless --tls_ca_file; the API token (if any) goes with every call.
  ASSIGN_OR_RETURN(s.security,
                   client::ChannelSecurity::FromFiles(
                       {absl::GetFlag(FLAGS_tls_ca_file), absl::GetFlag(FLAGS_tls_cert_file),
                        absl::GetFlag(FLAGS_tls_key_file)},
                       absl::GetFlag(FLAGS_token_file)));
  s.scratch = ScratchDir();
  return s;
}

void ReportHeader(const Setup& setup, Report& report) {
  const bool tls = !absl::GetFlag(FLAGS_tls_ca_file).empty();
  const std::string mode = absl::StrCat(
      setup.open_loop() ? absl::StrFormat("open loop, %.0f calls/s offered", setup.rate)
                        : absl::StrFormat("closed loop, %d calls in flight", setup.concurrency),
      tls ? ", gRPC over TLS" : "");
  const std::string label = absl::GetFlag(FLAGS_label);
  std::printf("== outbox_bench%s: %s, %s measured after %s warm-up ==\n",
              label.empty() ? "" : absl::StrCat(" [", label, "]").c_str(), mode.c_str(),
              absl::FormatDuration(setup.duration).c_str(),
              absl::FormatDuration(setup.warmup).c_str());
  report.Text("label", label);
  report.Text("mode", setup.open_loop() ? "open" : "closed");
  report.Text("grpc", tls ? "tls" : "plaintext");
  report.Figure("offered_rate_per_s", setup.open_loop() ? setup.rate : NAN);
  report.Figure("concurrency", setup.open_loop() ? NAN : setup.concurrency);
  report.Figure("duration_s", absl::ToDoubleSeconds(setup.duration));
}

struct Baselines {
  SqliteBaseline sqlite;
  BrokerBaseline broker;
  GrpcBaseline grpc;
  double naive = NAN;
  double composed = NAN;  // payments/s the parts would allow taking turns
};

// The parts on their own, while the services sit idle.
absl::StatusOr<Baselines> MeasureBaselines(const Setup& setup, Report& report) {
  ASSIGN_OR_RETURN(AmqpUrl url, BrokerUrl());
  Baselines b;
  report.Section("baselines (this machine, this run; services idle)");
  std::fflush(stdout);
  ASSIGN_OR_RETURN(b.sqlite,
                   MeasureSqlite(setup.scratch, absl::GetFlag(FLAGS_sqlite_baseline_time)));
  report.Line("sqlite WAL sync=FULL, 2-row transactions", PerSec(b.sqlite.tx2_per_s, "tx/s"));
  report.Line("sqlite WAL sync=FULL, 100-row transactions",
              absl::StrCat(PerSec(b.sqlite.rows_per_s_tx100, "rows/s"), "  (CPU ",
                           absl::StrFormat("%.1f µs", b.sqlite.cpu_us_per_row), " per row)"));
  std::fflush(stdout);
  ASSIGN_OR_RETURN(b.broker, MeasureBroker(url, absl::GetFlag(FLAGS_broker_baseline_time),
                                           absl::GetFlag(FLAGS_broker_pid)));
  report.Line("broker publish(win 256)+consume(prefetch 256)",
              absl::StrCat(PerSec(b.broker.flow_per_s, "msg/s"), "  (confirmed publishes ",
                           PerSec(b.broker.publish_per_s, "msg/s"), "; broker CPU ",
                           Micros(b.broker.cpu_us_per_message), " per message)"));
  std::fflush(stdout);
  const int in_flight = setup.open_loop() ? 64 : setup.concurrency;
  ASSIGN_OR_RETURN(b.grpc,
                   MeasureGrpc(in_flight, setup.channels, absl::GetFlag(FLAGS_grpc_baseline_time)));
  report.Line(absl::StrFormat("gRPC CreatePayment, trivial server, %d in flight", in_flight),
              absl::StrCat(PerSec(b.grpc.calls_per_s, "calls/s"), "  (server CPU ",
                           Micros(b.grpc.server_cpu_us_per_call), " per call)"));
  // A payment costs one call, two messages through the broker (the event
  // and the reply) and five row writes: if the parts took turns on the same
  // cores, this is the rate they would allow together.
  b.composed = 1 / (1 / b.grpc.calls_per_s + 2 / b.broker.flow_per_s +
                    kRowsPerPayment / b.sqlite.rows_per_s_tx100);
  report.Line("composed limit 1/(1/grpc + 2/broker + 5/sqlite rows)",
              PerSec(b.composed, "payments/s"));
  std::fflush(stdout);
  ASSIGN_OR_RETURN(b.naive,
                   MeasureNaive(setup.scratch, url, absl::GetFlag(FLAGS_naive_baseline_time)));
  report.Line("naive outbox (commit, publish+confirm, mark)", PerSec(b.naive, "items/s"));
  report.Figure("sqlite_tx2_per_s", b.sqlite.tx2_per_s);
  report.Figure("sqlite_rows_per_s_tx100", b.sqlite.rows_per_s_tx100);
  report.Figure("sqlite_cpu_us_per_row", b.sqlite.cpu_us_per_row);
  report.Figure("broker_flow_msgs_per_s", b.broker.flow_per_s);
  report.Figure("broker_publish_msgs_per_s", b.broker.publish_per_s);
  report.Figure("broker_cpu_us_per_message", b.broker.cpu_us_per_message);
  report.Figure("naive_items_per_s", b.naive);
  report.Figure("grpc_calls_per_s", b.grpc.calls_per_s);
  report.Figure("grpc_server_cpu_us_per_call", b.grpc.server_cpu_us_per_call);
  report.Figure("composed_limit_per_s", b.composed);
  std::fflush(stdout);
  return b;
}

// Stubs for the drive: each channel is one connection per payment shard,
// and every call goes to its key's shard (client/sharded_payment_stub.h).
absl::StatusOr<std::vector<std::unique_ptr<PaymentStub>>> ConnectStubs(const Setup& setup) {
  const std::vector<std::string> addrs = client::SplitAddresses(setup.payment_addr);
  std::vector<std::unique_ptr<PaymentStub>> stubs;
  for (int i = 0; i < setup.channels; ++i) {
    std::vector<std::unique_ptr<PaymentStub>> shards;
    for (const std::string& addr : addrs) {
      auto channel = client::NewChannel(addr, setup.security);  // a TCP connection of its own
      if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
        return absl::UnavailableError(absl::StrCat("cannot connect to payment_service at ", addr));
      }
      shards.push_back(::payment::v1::PaymentService::NewStub(channel));
    }
    if (shards.size() == 1) {
      stubs.push_back(std::move(shards.front()));
    } else {
      stubs.push_back(std::make_unique<client::ShardedPaymentStub>(std::move(shards)));
    }
  }
  return stubs;
}

// Comma-separated pids (a bad entry is an error).
absl::StatusOr<std::vector<int>> ParsePids(const std::string& text, const char* flag) {
  std::vector<int> pids;
  for (absl::string_view p : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int pid = 0;
    if (!absl::SimpleAtoi(p, &pid) || pid <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": comma-separated pids"));
    }
    pids.push_back(pid);
  }
  return pids;
}

// The client first, then the services' processes and the broker's.
absl::StatusOr<std::vector<WatchedProcess>> WatchedProcesses() {
  std::vector<WatchedProcess> watched = {{"outbox_bench (client)", "client", 0}};
  auto add = [&](const char* name, const char* key, int pid) {
    if (pid > 0) watched.push_back({name, key, pid});
  };
  add("payment_service", "payment", absl::GetFlag(FLAGS_payment_pid));
  add("accounting_service", "accounting", absl::GetFlag(FLAGS_accounting_pid));
  add("rabbitmq", "broker", absl::GetFlag(FLAGS_broker_pid));
  // Payment shards 1..N-1 (--payment_pid is shard 0's) and accounting shards 1..M-1.
  ASSIGN_OR_RETURN(std::vector<int> payments,
                   ParsePids(absl::GetFlag(FLAGS_other_payment_pids), "other_payment_pids"));
  for (size_t k = 0; k < payments.size(); ++k) {
    watched.push_back(
        {absl::StrCat("payment_service s", k + 1), absl::StrCat("payment_s", k + 1), payments[k]});
  }
  ASSIGN_OR_RETURN(std::vector<int> accountings,
                   ParsePids(absl::GetFlag(FLAGS_more_accounting_pids), "more_accounting_pids"));
  for (size_t k = 0; k < accountings.size(); ++k) {
    watched.push_back({absl::StrCat("accounting_service #", k + 1),
                       absl::StrCat("accounting", k + 1), accountings[k]});
  }
  return watched;
}

// Peak RSS of payment_service (shard 0) and of the largest accounting shard.
std::pair<double, double> PeakRss(const std::vector<WatchedProcess>& watched) {
  double payment = PeakRssMib(absl::GetFlag(FLAGS_payment_pid));
  double accounting = PeakRssMib(absl::GetFlag(FLAGS_accounting_pid));
  for (const WatchedProcess& p : watched) {
    if (p.key.rfind("accounting", 0) == 0) accounting = std::max(accounting, PeakRssMib(p.pid));
  }
  return {payment, accounting};
}

// The whole run's cost: CPU per payment made, per process, and the
// messages the broker carried per payment.
struct WholeRun {
  std::vector<WatchedProcess> processes;
  std::vector<double> cpu_seconds;  // per process, drive start to all SENT
  std::vector<double> switches;     // context switches, the same span
  std::vector<double> window_percent;
  int64_t payments = 0;  // made (acknowledged creates), warm-up included
  double seconds = NAN;  // drive start to all SENT
  double broker_messages = NAN;
};

void ReportSystem(const Setup& setup, const DriveResult& drive, const Drained& drained,
                  const SentResult& sent, Report& report) {
  const double create_per_s =
      static_cast<double>(drive.ok_in_window) / absl::ToDoubleSeconds(setup.duration);
  const Percentiles create = Summarize(drive.latency_ms);
  const Percentiles to_sent = Summarize(sent.to_sent_ms);
  report.Section("system (payment_service + accounting_service + broker)");
  report.Line(
      "create throughput",
      absl::StrCat(PerSec(create_per_s, "payments/s"), "  (", drive.ok, " ok, ", drive.failed,
                   " failed",
                   setup.open_loop() ? absl::StrCat(", ", drive.skipped, " skipped") : "", ")"));
  if (drive.failed > 0) {
    std::string codes;
    for (const auto& [code, n] : drive.errors_by_code)
      absl::StrAppend(&codes, " code", code, "=", n);
    report.Line("create errors", absl::StrCat(codes, "; first: ", drive.first_error));
  }
  report.Line(setup.open_loop() ? "create latency (from scheduled send)" : "create latency",
              absl::StrCat("p50 ", Ms(create.p50), "  p99 ", Ms(create.p99), "  p99.9 ",
                           Ms(create.p999), "  max ", Ms(create.max)));
  report.Line("create->SENT latency (server clocks, 1 ms)",
              absl::StrCat("p50 ", Ms(to_sent.p50), "  p99 ", Ms(to_sent.p99), "  p99.9 ",
                           Ms(to_sent.p999), "  max ", Ms(to_sent.max)));
  report.Line(
      "sustained payments reaching SENT",
      absl::StrCat(PerSec(sent.sustained_per_s, "payments/s"), "  (", sent.measured_sent, " over ",
                   absl::StrFormat("%.1f s", (sent.last_sent_ms - sent.first_created_ms) / 1000.0),
                   "; SENT per full second: min ", PerSec(sent.bucket_min, ""), ", median ",
                   PerSec(sent.bucket_median, ""), ")"));
  report.Line("drain after driving",
              absl::StrCat(drained.all_sent ? "all SENT after " : "NOT all SENT within ",
                           absl::FormatDuration(absl::Trunc(drained.after, absl::Milliseconds(1))),
                           "; measured not SENT: ", sent.measured - sent.measured_sent,
                           "; all payments ", sent.all_payments, ", SENT ", sent.all_sent));
  report.Figure("create_per_s", create_per_s);
  report.Figure("create_ok", static_cast<double>(drive.ok));
  report.Figure("create_failed", static_cast<double>(drive.failed));
  report.Figure("create_skipped", static_cast<double>(drive.skipped));
  report.Figure("create_p50_ms", create.p50);
  report.Figure("create_p99_ms", create.p99);
  report.Figure("create_p999_ms", create.p999);
  report.Figure("to_sent_p50_ms", to_sent.p50);
  report.Figure("to_sent_p99_ms", to_sent.p99);
  report.Figure("to_sent_p999_ms", to_sent.p999);
  report.Figure("to_sent_max_ms", to_sent.max);
  report.Figure("sustained_sent_per_s", sent.sustained_per_s);
  report.Figure("sent_per_s_bucket_min", sent.bucket_min);
  report.Figure("sent_per_s_bucket_median", sent.bucket_median);
  report.Figure("measured_not_sent", static_cast<double>(sent.measured - sent.measured_sent));
}

void ReportVouchers(const Setup& setup, const SentResult& sent, Report& report) {
  if (absl::GetFlag(FLAGS_accounting_addr).empty()) return;
  auto vouchers = CountVouchers(absl::GetFlag(FLAGS_accounting_addr), setup.security);
  if (!vouchers.ok()) {
    report.Line("vouchers", absl::StrCat("unavailable: ", vouchers.status().ToString()));
    return;
  }
  report.Line("vouchers", absl::StrCat(*vouchers, " for ", sent.all_sent, " SENT payments",
                                       *vouchers == sent.all_sent ? " (match)" : " (MISMATCH)"));
  report.Figure("vouchers", static_cast<double>(*vouchers));
}

struct CpuFigures {
  double system_us = NAN;    // payment + accounting + broker, per payment
  double floor_ratio = NAN;  // the design's CPU floor / system_us (with baselines)
};

CpuFigures ReportCpu(const WholeRun& run, const Baselines* baselines, Report& report) {
  std::string window;
  for (size_t i = 0; i < run.processes.size(); ++i) {
    absl::StrAppend(&window, window.empty() ? "" : ", ", run.processes[i].name, " ",
                    absl::StrFormat("%.0f%%", run.window_percent[i]));
    report.Figure(absl::StrCat("cpu_percent_", run.processes[i].key), run.window_percent[i]);
  }
  report.Line(
      absl::StrFormat("CPU while measuring (%d cores = %d%%)", std::thread::hardware_concurrency(),
                      100 * std::thread::hardware_concurrency()),
      window);
  report.Section(absl::StrFormat(
      "CPU per payment, whole run (warm-up, window, drain to SENT: %.1f s, %d payments)",
      run.seconds, run.payments));
  double system = 0;
  for (size_t i = 0; i < run.processes.size(); ++i) {
    const double us = Div(1e6 * run.cpu_seconds[i], static_cast<double>(run.payments));
    const double switches = Div(run.switches[i], static_cast<double>(run.payments));
    report.Line(run.processes[i].name,
                absl::StrFormat("%s  (%.2f context switches)", Micros(us).c_str(), switches));
    report.Figure(absl::StrCat("cpu_us_per_payment_", run.processes[i].key), us);
    report.Figure(absl::StrCat("switches_per_payment_", run.processes[i].key), switches);
    if (run.processes[i].pid != 0) system += us;
  }
  report.Line("system (all but the client)", Micros(system));
  report.Figure("cpu_us_per_payment_system", system);
  const double messages = Div(run.broker_messages, static_cast<double>(run.payments));
  report.Line("broker messages per payment",
              std::isfinite(messages) ? absl::StrFormat("%.2f  (events + replies)", messages)
                                      : "n/a (no --payment_metrics)");
  report.Figure("broker_messages_per_payment", messages);
  if (baselines == nullptr) return {system, NAN};
  const double floor = baselines->grpc.server_cpu_us_per_call +
                       messages * baselines->broker.cpu_us_per_message +
                       kRowsPerPayment * baselines->sqlite.cpu_us_per_row;
  report.Line("CPU floor of this design",
              absl::StrFormat("%s  (gRPC call + %.2f messages + %.0f rows)", Micros(floor).c_str(),
                              messages, kRowsPerPayment));
  report.Line("floor / actual", Ratio(Div(floor, system)));
  report.Figure("cpu_floor_us_per_payment", floor);
  report.Figure("ratio_floor_to_actual", Div(floor, system));
  return {system, Div(floor, system)};
}

void ReportDrain(const DrainResult& drain, Report& report) {
  report.Section("drain after the accounting outage (from its restart; server clocks)");
  report.Line("backlog when accounting_service returned",
              absl::StrCat(drain.backlog, " payments not SENT (", drain.created_after,
                           " more created after it)"));
  report.Line(
      "backlog drain rate, return -> last SENT",
      absl::StrCat(PerSec(drain.per_s, "payments/s"), "  (", drain.sent_after,
                   " SENT; first after ", drain.first_sent_ms, " ms, last after ",
                   absl::StrFormat("%.1f s", drain.last_sent_ms / 1000.0),
                   "; SENT per full second: median ", PerSec(drain.bucket_median, ""), ")"));
  report.Figure("drain_backlog", static_cast<double>(drain.backlog));
  report.Figure("drain_created_after_return", static_cast<double>(drain.created_after));
  report.Figure("drain_first_sent_ms", static_cast<double>(drain.first_sent_ms));
  report.Figure("drain_last_sent_ms", static_cast<double>(drain.last_sent_ms));
  report.Figure("drain_per_s", drain.per_s);
  report.Figure("drain_bucket_median_per_s", drain.bucket_median);
}

void ReportRatios(const Baselines& b, double sustained, double create_per_s, Report& report) {
  report.Section("ratios (same run)");
  report.Line("sustained / composed limit", Ratio(Div(sustained, b.composed)));
  report.Figure("ratio_sustained_to_composed", Div(sustained, b.composed));
  const double broker_payments = b.broker.flow_per_s / 2;  // a payment is two messages
  report.Line("sustained / broker ceiling (msg/s / 2)",
              absl::StrCat(Ratio(Div(sustained, broker_payments)), "  (ceiling ",
                           PerSec(broker_payments, "payments/s"), ")"));
  report.Line("create throughput / sqlite 2-row tx/s",
              absl::StrCat(Ratio(Div(create_per_s, b.sqlite.tx2_per_s)),
                           "  (>1: group commit beats a transaction per payment)"));
  report.Line("sustained / sqlite 100-row-tx rows/s / 3",
              absl::StrCat(Ratio(Div(sustained, b.sqlite.rows_per_s_tx100 / 3)),
                           "  (a payment writes 2 rows and updates 1)"));
  report.Line("sustained / naive outbox measured", Ratio(Div(sustained, b.naive)));
  report.Figure("ratio_sustained_to_broker_ceiling", Div(sustained, broker_payments));
  report.Figure("ratio_create_to_sqlite_tx2", Div(create_per_s, b.sqlite.tx2_per_s));
  report.Figure("ratio_sustained_to_naive", Div(sustained, b.naive));
}

struct TargetInputs {
  const Setup& setup;
  const DriveResult& drive;
  bool all_sent;
  const SentResult& sent;
  const DrainResult* drain;  // the drain scenario only
  double system_cpu_us;
  double floor_ratio;  // NaN without baselines
  std::pair<double, double> rss;
};

void ReportTargets(const TargetInputs& in, Report& report) {
  const double create_per_s =
      static_cast<double>(in.drive.ok_in_window) / absl::ToDoubleSeconds(in.setup.duration);
  const bool carried =
      in.drive.skipped == 0 && in.drive.failed == 0 && create_per_s >= 0.97 * in.setup.rate;
  report.Section("targets (the CPU ones hold on any machine; the rest on a quiet one)");
  if (in.drain != nullptr) {
    // create->SENT latency spans the outage, accounting_service is a new
    // process, and payment_service's peak RSS includes the SQLite sorter of
    // this program's "anything SENDING?" listings of the backlog: no targets.
    report.Check(
        ">= 3,000 payments/s backlog drain after the outage",
        in.all_sent && in.drain->per_s >= kTargetDrainPerS,
        absl::StrCat(PerSec(in.drain->per_s, "payments/s"), in.all_sent ? "" : ", NOT all SENT"));
    report.Check("offered load carried", carried, PerSec(create_per_s, "payments/s created"));
    return;
  }
  report.Check("system CPU per payment <= 240 µs", in.system_cpu_us <= kTargetSystemCpuUs,
               Micros(in.system_cpu_us));
  if (std::isfinite(in.floor_ratio)) {
    report.Check("CPU floor / actual >= 0.8", in.floor_ratio >= kTargetFloorRatio,
                 Ratio(in.floor_ratio));
  }
  const Percentiles to_sent = Summarize(in.sent.to_sent_ms);
  if (!in.setup.open_loop()) {
    report.Check(">= 2,500 payments/s sustained to SENT",
                 in.sent.sustained_per_s >= kTargetSustained,
                 PerSec(in.sent.sustained_per_s, "payments/s"));
    report.Check("create->SENT p99 <= 100 ms at saturation", to_sent.p99 <= 100, Ms(to_sent.p99));
    return;
  }
  const bool at_target_rate = in.setup.rate >= 1000;
  report.Check(
      "create->SENT p99 <= 50 ms at 1,000/s offered", at_target_rate && to_sent.p99 <= kTargetP99Ms,
      absl::StrCat(Ms(to_sent.p99), at_target_rate ? "" : " (offered rate below 1,000/s)"));
  report.Check("payment_service peak RSS <= 64 MiB", in.rss.first <= kTargetRssMib,
               absl::StrFormat("%.1f MiB", in.rss.first));
  report.Check("accounting_service peak RSS <= 64 MiB", in.rss.second <= kTargetRssMib,
               absl::StrFormat("%.1f MiB", in.rss.second));
  report.Check("offered load carried", carried, PerSec(create_per_s, "payments/s created"));
}

// Drives the calls; the ledger (if asked for) gets every acknowledged create.
absl::StatusOr<DriveResult> Drive(const Setup& setup,
                                  std::vector<std::unique_ptr<PaymentStub>> stubs,
                                  const std::string& run_tag) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> ledger(nullptr, &std::fclose);
  if (const std::string path = absl::GetFlag(FLAGS_ledger); !path.empty()) {
    ledger.reset(std::fopen(path.c_str(), "w"));
    if (ledger == nullptr)
      return absl::InvalidArgumentError(absl::StrCat("cannot write --ledger ", path));
  }
  CreateDriver driver(std::move(stubs), run_tag, ledger.get());
  return setup.open_loop() ? driver.OpenLoop(setup.rate, setup.warmup, setup.duration,
                                             absl::GetFlag(FLAGS_max_in_flight))
                           : driver.ClosedLoop(setup.concurrency, setup.warmup, setup.duration);
}

// What payment_service has published and received so far (NaN without
// --payment_metrics or when it cannot be read).
double BrokerMessagesSoFar() {
  const std::string addr = absl::GetFlag(FLAGS_payment_metrics);
  if (addr.empty()) return NAN;
  auto traffic = ReadBrokerTraffic(addr);
  if (!traffic.ok()) {
    std::fprintf(stderr, "outbox_bench: %s\n", traffic.status().ToString().c_str());
    return NAN;
  }
  return traffic->events + traffic->replies;
}

struct Measured {
  DriveResult drive;
  int64_t mark_ms = 0;  // drain scenario: when accounting_service came back (Unix ms)
  Drained drained;
  WholeRun run;
  SentResult sent;
  std::pair<double, double> rss;  // peak RSS of payment, accounting (MiB)
};

// Drives the load, waits until every payment is SENT (in the drain scenario
// after accounting_service is back), and reads what the whole run cost
// before this program's own listing of the payments.
absl::StatusOr<Measured> DriveToSent(const Setup& setup) {
  ASSIGN_OR_RETURN(auto stubs, ConnectStubs(setup));
  auto query_stub =
      client::NewPaymentStub(client::SplitAddresses(setup.payment_addr), setup.security);
  const std::string run_tag = client::RandomRunId();
  Measured m;
  ASSIGN_OR_RETURN(m.run.processes, WatchedProcesses());
  const double messages_before = BrokerMessagesSoFar();
  const absl::Time drive_start = absl::Now();
  const CpuMeter whole_run(m.run.processes);
  CpuMonitor window(m.run.processes, drive_start + setup.warmup,
                    drive_start + setup.warmup + setup.duration);
  ASSIGN_OR_RETURN(m.drive, Drive(setup, std::move(stubs), run_tag));
  const std::string mark_file = absl::GetFlag(FLAGS_outage_mark_file);
  if (!mark_file.empty()) {
    ASSIGN_OR_RETURN(m.mark_ms,
                     AwaitMark(mark_file, absl::Now() + absl::GetFlag(FLAGS_drain_timeout)));
  }
  m.drained = AwaitAllSent(*query_stub, absl::GetFlag(FLAGS_drain_timeout),
                           mark_file.empty() ? absl::Milliseconds(200) : absl::Seconds(2));
  m.run.cpu_seconds = whole_run.Used();
  m.run.switches = whole_run.Switches();
  m.run.seconds = absl::ToDoubleSeconds(absl::Now() - drive_start);
  m.run.broker_messages = BrokerMessagesSoFar() - messages_before;
  m.run.payments = m.drive.ok_all;
  m.run.window_percent = window.Percent();
  ASSIGN_OR_RETURN(m.sent, CollectSent(*query_stub, CreateDriver::MeasuredPrefix(run_tag)));
  m.rss = PeakRss(m.run.processes);
  return m;
}

// "0.53", or "n/a" when it could not be measured.
std::string PerUnit(double v) {
  return std::isfinite(v) ? absl::StrFormat("%.2f", v) : "n/a";
}

// The floor's figures for the JSON line.
void FloorFigures(const FloorParts& parts, Report& report) {
  report.Figure("floor_us_grpc_server", parts.grpc.server_us_per_call);
  report.Figure("floor_us_grpc_client", parts.grpc.client_us_per_call);
  report.Figure("floor_grpc_calls_per_s", parts.grpc.calls_per_s);
  report.Figure("floor_us_broker_per_message", parts.broker.us_per_message);
  report.Figure("floor_broker_fsyncs_per_message", parts.broker.fsyncs_per_message);
  report.Figure("floor_broker_msgs_per_s", parts.broker.messages_per_s);
  report.Figure("floor_us_broker_per_message_transient", parts.broker_transient.us_per_message);
  report.Figure("floor_broker_fsyncs_per_message_transient",
                parts.broker_transient.fsyncs_per_message);
  report.Figure("floor_us_sqlite_tx", parts.sqlite.us_per_tx);
  report.Figure("floor_sqlite_fsyncs_per_tx", parts.sqlite.fsyncs_per_tx);
  report.Figure("floor_sqlite_tx_per_s", parts.sqlite.tx_per_s);
  report.Figure("floor_us_per_payment", FloorPerPayment(parts));
}

// --floor_rate: each part alone at that rate, one after the other, and the
// floor they compose; no services are driven.
absl::Status RunFloor() {
  const double rate = absl::GetFlag(FLAGS_floor_rate);
  const absl::Duration time = absl::GetFlag(FLAGS_floor_time);
  const int channels = absl::GetFlag(FLAGS_channels);
  const int broker_pid = absl::GetFlag(FLAGS_broker_pid);
  if (rate < 0 || time <= absl::ZeroDuration() || channels < 1) {
    return absl::InvalidArgumentError("--floor_rate, --floor_time and --channels must be positive");
  }
  if (absl::GetFlag(FLAGS_amqp_url).empty()) {
    return absl::InvalidArgumentError("--floor_rate needs --amqp_url");
  }
  ASSIGN_OR_RETURN(AmqpUrl url, BrokerUrl());
  Report report;
  const std::string label = absl::GetFlag(FLAGS_label);
  std::printf("== outbox_bench%s: the parts alone, each paced at %.0f/s for %s ==\n",
              label.empty() ? "" : absl::StrCat(" [", label, "]").c_str(), rate,
              absl::FormatDuration(time).c_str());
  report.Text("label", label);
  report.Text("mode", "floor");
  report.Figure("floor_rate_per_s", rate);
  report.Figure("floor_time_s", absl::ToDoubleSeconds(time));
  report.Section(
      absl::StrFormat("floor at %.0f/s (CPU per unit of work, idle between ticks included)", rate));
  std::fflush(stdout);
  FloorParts parts;
  ASSIGN_OR_RETURN(parts.grpc, MeasureGrpcFloor(rate, channels, time));
  report.Line(
      absl::StrFormat("gRPC call, trivial server (%d channels)", channels),
      absl::StrFormat("server %s per call  (client %s; %s)", Micros(parts.grpc.server_us_per_call),
                      Micros(parts.grpc.client_us_per_call),
                      PerSec(parts.grpc.calls_per_s, "calls/s")));
  std::fflush(stdout);
  const char* const broker_cpu = broker_pid > 0 ? "" : " (no --broker_pid)";
  auto broker_line = [&](const char* what, const BrokerFloor& b) {
    report.Line(what,
                absl::StrFormat("%s per message%s  (%s fsyncs per message; %s)",
                                Micros(b.us_per_message), broker_cpu, PerUnit(b.fsyncs_per_message),
                                PerSec(b.messages_per_s, "msg/s")));
    std::fflush(stdout);
  };
  ASSIGN_OR_RETURN(parts.broker, MeasureBrokerFloor(url, rate, time, broker_pid, true));
  broker_line("broker msg, persistent: confirm, consume+ack", parts.broker);
  ASSIGN_OR_RETURN(parts.broker_transient, MeasureBrokerFloor(url, rate, time, broker_pid, false));
  broker_line("broker msg, transient: confirm, consume+ack", parts.broker_transient);
  ASSIGN_OR_RETURN(parts.sqlite, MeasureSqliteFloor(ScratchDir(), rate, time));
  report.Line("sqlite 2-row tx, WAL, synchronous=FULL",
              absl::StrFormat("%s per transaction  (thread CPU; %s fsyncs per tx; %s)",
                              Micros(parts.sqlite.us_per_tx), PerUnit(parts.sqlite.fsyncs_per_tx),
                              PerSec(parts.sqlite.tx_per_s, "tx/s")));
  report.Line("floor per payment",
              absl::StrCat(Micros(FloorPerPayment(parts)), "  = ", FloorComposition(parts)));
  report.Line(
      "persistence's share of the floor",
      absl::StrFormat("%s  (2 x (persistent - transient) broker CPU per message)",
                      Micros(kFloorMessagesPerPayment * (parts.broker.us_per_message -
                                                         parts.broker_transient.us_per_message))));
  FloorFigures(parts, report);
  if (absl::GetFlag(FLAGS_json)) std::printf("%s\n", report.Json().c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

absl::Status Run() {
  if (absl::GetFlag(FLAGS_floor_rate) != 0) return RunFloor();
  ASSIGN_OR_RETURN(const Setup setup, ReadSetup());
  Report report;
  ReportHeader(setup, report);
  Baselines baselines;
  const bool with_baselines = absl::GetFlag(FLAGS_baselines);
  if (with_baselines) {
    ASSIGN_OR_RETURN(baselines, MeasureBaselines(setup, report));
  }
  ASSIGN_OR_RETURN(const Measured m, DriveToSent(setup));

  ReportSystem(setup, m.drive, m.drained, m.sent, report);
  ReportVouchers(setup, m.sent, report);
  report.Line("peak RSS (VmHWM)",
              absl::StrFormat("payment_service %.1f MiB, accounting_service %.1f MiB", m.rss.first,
                              m.rss.second));
  report.Figure("payment_peak_rss_mib", m.rss.first);
  report.Figure("accounting_peak_rss_mib", m.rss.second);
  const CpuFigures cpu = ReportCpu(m.run, with_baselines ? &baselines : nullptr, report);
  const bool drain_run = !absl::GetFlag(FLAGS_outage_mark_file).empty();
  DrainResult drain;
  if (drain_run) {
    drain = MeasureDrain(m.sent, m.mark_ms);
    ReportDrain(drain, report);
  }
  const double create_per_s =
      static_cast<double>(m.drive.ok_in_window) / absl::ToDoubleSeconds(setup.duration);
  if (with_baselines) ReportRatios(baselines, m.sent.sustained_per_s, create_per_s, report);
  report.Line("sustained / naive reference 400/s",
              Ratio(Div(m.sent.sustained_per_s, kNaiveReference)));
  report.Figure("ratio_sustained_to_400", Div(m.sent.sustained_per_s, kNaiveReference));
  ReportTargets({setup, m.drive, m.drained.all_sent, m.sent, drain_run ? &drain : nullptr,
                 cpu.system_us, cpu.floor_ratio, m.rss},
                report);
  if (absl::GetFlag(FLAGS_json)) std::printf("%s\n", report.Json().c_str());
  std::fflush(stdout);
  if (m.drive.ok == 0) return absl::UnavailableError("no CreatePayment call succeeded");
  return absl::OkStatus();
}

}  // namespace
}  // namespace outbox::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "outbox_bench --payment_addr=HOST:PORT [--concurrency=N | --rate=R] [--duration=20s]\n"
      "  [--baselines --amqp_url=URL] [--payment_pid=P --accounting_pid=A --broker_pid=B]\n"
      "  [--payment_metrics=HOST:PORT]\n"
      "outbox_bench --floor_rate=R [--floor_time=10s] --amqp_url=URL [--broker_pid=B]\n"
      "  [--scratch_dir=DIR]\n"
      "Drives CreatePayment and reports throughput, latency to SENT, CPU per payment and\n"
      "same-run baselines; with --floor_rate, drives no services and reports the CPU per\n"
      "unit of work of each part alone at that rate and the floor per payment they compose.");
  absl::ParseCommandLine(argc, argv);
  if (absl::GetFlag(FLAGS_serve_trivial_payments)) return outbox::bench::ServeTrivialPayments();
  absl::Status s = outbox::bench::Run();
  if (!s.ok()) {
    std::fprintf(stderr, "outbox_bench: %s\n", s.ToString().c_str());
    return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}
