// ack_drain_bench: what the acknowledgement backlog left by an ack-path
// outage costs when it drains. While payment's ack listener is cut off,
// accounting keeps booking and its cumulative replies pile up in the reply
// queue: up to --replies of them (the listener's prefetch), each closing
// --per_reply rows. When the path is back, the listener takes them in one
// batch. This program fills a fresh payment.db with that many SENDING rows
// through payment_service's business write on the library's GroupWriter
// (group commit, SQLite, FULL durability),
// queues the replies, and drains them with the real AckListener while
// --clients threads keep creating payments through the same writer. It does
// so once per --max_rows value (rows per acknowledgement transaction), each
// on a fresh file, in one run, and prints for each: the drain time, the
// longest acknowledgement transaction, and the creates' latency meanwhile.
//
// The reply queue is an in-memory one (the broker's part of the drain does
// not change with the bound; the write lock, which does, is SQLite's own).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/percentiles.h"
#include "payment_service/payment_store.h"
#include "shared/base/clock.h"
#include "shared/base/internal/ids.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/internal/ack_listener.h"
#include "shared/sqlite/internal/group_writer.h"
#include "shared/sqlite/internal/sqlite_outbox.h"
#include "shared/testing/fakes.h"

ABSL_FLAG(int, replies, 1024, "replies waiting in the reply queue (the listener's prefetch)");
ABSL_FLAG(int, per_reply, 256, "rows each cumulative reply closes (accounting's batch)");
ABSL_FLAG(std::string, max_rows, "262144,4096",
          "rows per acknowledgement transaction, one drain per value (262144: the whole backlog "
          "in one transaction)");
ABSL_FLAG(int, clients, 4, "threads creating payments during the drain, one at a time each");
ABSL_FLAG(std::string, dir, "", "where the payment.db files go (default $TMPDIR or /tmp)");

namespace outbox::bench {
namespace {

// Records the time each acknowledgement transaction took.
class TimedRepository final : public OutboxRepository {
 public:
  explicit TimedRepository(OutboxRepository& inner) : inner_(inner) {}
  absl::StatusOr<AckTally> RecordAcks(const std::vector<std::string>& ids) override {
    const absl::Time start = absl::Now();
    auto tally = inner_.RecordAcks(ids);
    longest_ = std::max(longest_, absl::Now() - start);
    ++transactions_;
    return tally;
  }
  absl::StatusOr<int> RecordRejects(const std::vector<Rejection>& rejects) override {
    return inner_.RecordRejects(rejects);
  }
  absl::Status RecordPublishFailure(const std::vector<std::string>& ids,
                                    const std::string& error) override {
    return inner_.RecordPublishFailure(ids, error);
  }
  absl::StatusOr<std::vector<std::string>> TakenOver(const std::vector<std::string>& ids) override {
    return inner_.TakenOver(ids);
  }
  absl::Duration longest() const { return longest_; }
  int transactions() const { return transactions_; }

 private:
  OutboxRepository& inner_;
  absl::Duration longest_ = absl::ZeroDuration();
  int transactions_ = 0;
};

// The relay gets nothing to do here: every row's reply is already queued.
class NoRelay final : public RelayQueue {
 public:
  using RelayQueue::Enqueue;
  void Enqueue(std::vector<OutgoingMessage>, absl::Time) override {}
};

// A reply as this bench writes it: "ack <id>,<id>,...".
absl::StatusOr<std::vector<Acknowledgement>> DecodeReply(const Delivery& reply) {
  absl::string_view ids = reply.body;
  if (!absl::ConsumePrefix(&ids, "ack ")) return absl::InvalidArgumentError("not a reply");
  std::vector<Acknowledgement> acks;
  for (absl::string_view id : absl::StrSplit(ids, ',')) acks.push_back({std::string(id), "", true});
  return acks;
}

payment::PaymentInput Input(const std::string& key) {
  return {key, "bench-payer", "bench-payee", 100, "EUR", ""};
}

struct Result {
  int max_rows = 0;
  absl::Duration fill, drain, longest_tx;
  int transactions = 0;
  client::Percentiles create_ms;
  int creates_failed = 0;
};

Result DrainOnce(const std::string& dir, int max_rows) {
  Result r;
  r.max_rows = max_rows;
  const std::string path = absl::StrCat(dir, "/ack_drain_", getpid(), "_", max_rows, ".db");
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  auto store = payment::PaymentStore::Open(path, DbOptions{});
  if (!store.ok()) {
    std::fprintf(stderr, "ack_drain_bench: %s\n", std::string(store.status().message()).c_str());
    std::exit(1);
  }
  UuidGenerator ids;
  MetricsRegistry metrics;
  GroupWriterOptions options;
  options.max_unsent = 0;  // no backpressure: the backlog is the point
  SqliteOutbox outbox((*store)->file(), SystemClock::Get());
  NoRelay relay;
  GroupWriter writer((*store)->file(), outbox, relay, SystemClock::Get(), metrics, options);
  writer.Start();
  payment::PaymentCreator creator(
      [&writer](MessageSpec spec, BusinessWrite business, GroupWriter::WriteDone done) {
        spec.topic = "PAY_QUEUE";
        spec.reply_to = "ACC_QUEUE";
        writer.WriteAsync(std::move(spec), std::move(business), std::move(done));
      },
      **store, ids, SystemClock::Get());

  // The backlog: replies x per_reply SENDING rows, created 64 at a time.
  const int replies = absl::GetFlag(FLAGS_replies), per_reply = absl::GetFlag(FLAGS_per_reply);
  const int rows = replies * per_reply;
  std::vector<std::string> message_ids(static_cast<size_t>(rows));
  const absl::Time fill_start = absl::Now();
  std::atomic<int> next{0};
  std::vector<std::thread> fillers;
  for (int t = 0; t < 64; ++t) {
    fillers.emplace_back([&] {
      for (int i = next++; i < rows; i = next++) {
        payment::CreateOutcome out = creator.Create(Input(absl::StrCat("backlog-", i)));
        if (!out.status.ok()) {
          std::fprintf(stderr, "ack_drain_bench: fill: %s\n",
                       std::string(out.status.message()).c_str());
          std::exit(1);
        }
        message_ids[static_cast<size_t>(i)] = out.record.outbox.message_id;
      }
    });
  }
  for (std::thread& t : fillers) t.join();
  r.fill = absl::Now() - fill_start;

  testing::FakeConsumer queue;
  for (int q = 0; q < replies; ++q) {
    Delivery d;
    d.message_id = absl::StrCat("reply-", q);
    d.body = "ack ";
    for (int i = 0; i < per_reply; ++i) {
      absl::StrAppend(&d.body, i == 0 ? "" : ",",
                      message_ids[static_cast<size_t>(q * per_reply + i)]);
    }
    queue.Push(std::move(d));
  }
  TimedRepository timed(writer);
  AckListenerOptions ack_options{"ACC_QUEUE", replies};
  ack_options.max_rows_per_commit = max_rows;
  AckListener listener(queue, timed, DecodeReply, metrics, ack_options);

  // Creates during the drain, as clients keep calling.
  std::atomic<bool> draining{true};
  std::mutex mu;
  std::vector<double> latencies_ms;
  std::atomic<int> failed{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < absl::GetFlag(FLAGS_clients); ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; draining; ++i) {
        const absl::Time start = absl::Now();
        payment::CreateOutcome out = creator.Create(Input(absl::StrCat("during-", c, "-", i)));
        const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
        if (!out.status.ok()) ++failed;
        std::lock_guard<std::mutex> lock(mu);
        latencies_ms.push_back(ms);
      }
    });
  }
  absl::SleepFor(absl::Milliseconds(200));  // the clients are under way
  const absl::Time drain_start = absl::Now();
  while (queue.acked.size() < static_cast<size_t>(replies)) listener.Step();
  r.drain = absl::Now() - drain_start;
  absl::SleepFor(absl::Milliseconds(200));
  draining = false;
  for (std::thread& t : clients) t.join();
  writer.Stop();
  r.longest_tx = timed.longest();
  r.transactions = timed.transactions();
  r.create_ms = client::Summarize(latencies_ms);
  r.creates_failed = failed;
  if (listener.acknowledged() != rows) {
    std::fprintf(stderr, "ack_drain_bench: %lld of %d rows closed\n",
                 static_cast<long long>(listener.acknowledged()), rows);
    std::exit(1);
  }
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  return r;
}

}  // namespace
}  // namespace outbox::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Drains an acknowledgement backlog (replies x per_reply rows) with the real ack listener "
      "and writer while clients create payments; once per --max_rows value.");
  absl::ParseCommandLine(argc, argv);
  std::string dir = absl::GetFlag(FLAGS_dir);
  if (dir.empty()) dir = std::getenv("TMPDIR") != nullptr ? std::getenv("TMPDIR") : "/tmp";
  std::vector<int> bounds;
  for (absl::string_view v : absl::StrSplit(absl::GetFlag(FLAGS_max_rows), ',')) {
    int n = 0;
    if (!absl::SimpleAtoi(v, &n) || n <= 0) {
      std::fprintf(stderr, "ack_drain_bench: --max_rows: '%s' is not a positive number\n",
                   std::string(v).c_str());
      return 2;
    }
    bounds.push_back(n);
  }
  std::printf("ack drain: %d replies x %d rows, %d clients creating meanwhile\n",
              absl::GetFlag(FLAGS_replies), absl::GetFlag(FLAGS_per_reply),
              absl::GetFlag(FLAGS_clients));
  std::printf("%-10s %8s %8s %6s %11s %9s %9s %9s %7s %6s\n", "max_rows", "fill_s", "drain_s", "tx",
              "longest_tx", "create_p50", "p99_ms", "max_ms", "creates", "failed");
  for (int bound : bounds) {
    const outbox::bench::Result r = outbox::bench::DrainOnce(dir, bound);
    std::printf("%-10d %8.2f %8.2f %6d %10.0fms %9.2fms %9.2f %9.2f %7zu %6d\n", r.max_rows,
                absl::ToDoubleSeconds(r.fill), absl::ToDoubleSeconds(r.drain), r.transactions,
                absl::ToDoubleMilliseconds(r.longest_tx), r.create_ms.p50, r.create_ms.p99,
                r.create_ms.max, r.create_ms.n, r.creates_failed);
    std::fflush(stdout);
  }
  return 0;
}
