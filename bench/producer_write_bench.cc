// producer_write_bench: how many messages a producer written on the library
// commits per second, against fixed-size groups. Each run opens a fresh
// SQLite file (WAL, synchronous=FULL unless --durability says otherwise)
// with a business table and the outbox tables, and for --seconds:
//   write  --threads callers each call outbox::Producer::Write (its business
//          row and its outbox row), as an adopter's request handlers would;
//          the producer's group writer commits the writes queued together
//          in one transaction (one fsync);
//   group  one caller commits --group messages per write transaction:
//          SqliteFile::Write with the library's OutboxInserter, the ceiling
//          of a group of that size without a writer thread.
// The broker is left out (the relay's links are the library's fakes, never
// started), so the figure is the commit path alone. Prints messages/s,
// transactions/s, messages per transaction and the latency of a Write
// (p50/p99).
#include <SQLiteCpp/SQLiteCpp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "shared/roles/producer.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/sqlite/schema.h"
#include "shared/sqlite/sqlite_file.h"
#include "shared/testing/fakes.h"

ABSL_FLAG(std::string, threads, "1,4,16", "concurrent Write callers, one run per count");
ABSL_FLAG(std::string, group, "16,64", "messages per transaction of the group runs");
ABSL_FLAG(int, seconds, 5, "length of each run");
ABSL_FLAG(std::string, durability, "full", "full | normal | off (synchronous)");
ABSL_FLAG(std::string, dir, "", "where the files are made (default $TMPDIR or /tmp)");

namespace outbox::bench {
namespace {

const DbSchema& Schema() {
  static const DbSchema* const schema = new DbSchema{
      {{"loans and the outbox", [](SQLite::Database& db) {
          db.exec("CREATE TABLE loans (id TEXT PRIMARY KEY, book TEXT NOT NULL, amount INTEGER)");
          CreateOutboxTable(db);
        }}}};
  return *schema;
}

std::string Dir() {
  if (!absl::GetFlag(FLAGS_dir).empty()) return absl::GetFlag(FLAGS_dir);
  const char* tmp = std::getenv("TMPDIR");
  return tmp ? tmp : "/tmp";
}

std::unique_ptr<SqliteFile> OpenFresh(const std::string& name) {
  const std::string path =
      absl::StrCat(Dir(), "/producer_write_bench_", getpid(), "_", name, ".db");
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  DbOptions options;
  options.durability = *ParseDurability(absl::GetFlag(FLAGS_durability));
  auto file = OpenSqliteFile(path, options, &Schema());
  if (!file.ok()) {
    std::fprintf(stderr, "producer_write_bench: %s\n",
                 std::string(file.status().message()).c_str());
    std::exit(2);
  }
  return std::move(file).value();
}

MessageSpec Spec(const std::string& id) {
  MessageSpec spec;
  spec.message_id = id;
  spec.biz_type = "loan";
  spec.biz_key = id;
  spec.message_type = "LoanOpened";
  spec.payload = std::string(120, 'p');
  return spec;
}

double Percentile(std::vector<absl::Duration>& v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
  std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(i), v.end());
  return absl::ToDoubleMilliseconds(v[i]);
}

void RunWrites(int threads) {
  auto file = OpenFresh(absl::StrCat("write", threads));
  Producer::Options options;
  options.queue = "loans";
  options.signing = Signing::Unsigned();
  auto producer = Producer::Create(*file, options, std::make_unique<testing::FakePublisher>(),
                                   std::make_unique<testing::FakeConsumer>());
  if (!producer.ok()) {
    std::fprintf(stderr, "producer_write_bench: %s\n",
                 std::string(producer.status().message()).c_str());
    std::exit(2);
  }
  std::atomic<bool> stop{false};
  std::atomic<int64_t> failed{0};
  std::vector<std::vector<absl::Duration>> latencies(static_cast<size_t>(threads));
  std::vector<std::thread> callers;
  const absl::Time start = absl::Now();
  for (int t = 0; t < threads; ++t) {
    callers.emplace_back([&, t] {
      for (int64_t n = 0; !stop.load(); ++n) {
        const std::string id = absl::StrCat("t", t, "-", n);
        const absl::Time before = absl::Now();
        auto written = (*producer)->Write(Spec(id), [&](SQLite::Database& tx) {
          SQLite::Statement insert(tx, "INSERT INTO loans (id, book, amount) VALUES (?, ?, ?)");
          insert.bind(1, id);
          insert.bind(2, "book-42");
          insert.bind(3, static_cast<int64_t>(100));
          insert.exec();
          return absl::OkStatus();
        });
        if (!written.ok()) ++failed;
        latencies[static_cast<size_t>(t)].push_back(absl::Now() - before);
      }
    });
  }
  absl::SleepFor(absl::Seconds(absl::GetFlag(FLAGS_seconds)));
  stop = true;
  for (std::thread& c : callers) c.join();
  const double secs = absl::ToDoubleSeconds(absl::Now() - start);
  const double transactions = static_cast<double>((*producer)->group_commits());
  std::vector<absl::Duration> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  const double n = static_cast<double>(all.size());
  std::printf(
      "write  threads=%-3d messages/s=%8.0f transactions/s=%8.0f messages/transaction=%6.1f "
      "p50=%.2fms p99=%.2fms failed=%lld\n",
      threads, n / secs, transactions / secs, transactions > 0 ? n / transactions : 0.0,
      Percentile(all, 0.50), Percentile(all, 0.99), static_cast<long long>(failed.load()));
}

void RunGroup(int group) {
  auto file = OpenFresh(absl::StrCat("group", group));
  int64_t messages = 0, transactions = 0;
  const absl::Time start = absl::Now();
  const absl::Time end = start + absl::Seconds(absl::GetFlag(FLAGS_seconds));
  while (absl::Now() < end) {
    std::vector<OutboxMessage> rows;
    for (int i = 0; i < group; ++i) {
      rows.push_back(NewOutboxMessage(Spec(absl::StrCat("g", messages + i)),
                                      SystemClock::Get().NowMillis(), RetryPolicy{}));
    }
    absl::Status s = file->Write([&](SQLite::Database& tx) -> absl::Status {
      SQLite::Statement insert(tx, "INSERT INTO loans (id, book, amount) VALUES (?, ?, ?)");
      OutboxInserter inserter(tx);
      for (const OutboxMessage& row : rows) {
        insert.reset();
        insert.bind(1, row.message_id);
        insert.bind(2, "book-42");
        insert.bind(3, static_cast<int64_t>(100));
        insert.exec();
        inserter.Insert(row);
      }
      return absl::OkStatus();
    });
    if (!s.ok()) {
      std::fprintf(stderr, "producer_write_bench: %s\n", std::string(s.message()).c_str());
      std::exit(2);
    }
    messages += group;
    ++transactions;
  }
  const double secs = absl::ToDoubleSeconds(absl::Now() - start);
  std::printf("group  size=%-5d messages/s=%8.0f transactions/s=%8.0f messages/transaction=%6d\n",
              group, static_cast<double>(messages) / secs, static_cast<double>(transactions) / secs,
              group);
}

std::vector<int> Counts(const std::string& list) {
  std::vector<int> out;
  for (absl::string_view part : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    int n = 0;
    if (absl::SimpleAtoi(part, &n) && n > 0) out.push_back(n);
  }
  return out;
}

}  // namespace
}  // namespace outbox::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Messages a library producer commits per second, and a group commit's");
  absl::ParseCommandLine(argc, argv);
  std::printf("producer_write_bench: synchronous=%s, %d s per run, files in %s\n",
              absl::GetFlag(FLAGS_durability).c_str(), absl::GetFlag(FLAGS_seconds),
              outbox::bench::Dir().c_str());
  for (int threads : outbox::bench::Counts(absl::GetFlag(FLAGS_threads))) {
    outbox::bench::RunWrites(threads);
  }
  for (int group : outbox::bench::Counts(absl::GetFlag(FLAGS_group))) {
    outbox::bench::RunGroup(group);
  }
  return 0;
}
