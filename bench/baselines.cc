#include "bench/baselines.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "bench/create_driver.h"
#include "bench/process_stats.h"
#include "bench/report.h"
#include "bench/trivial_server.h"
#include "client/channel.h"
#include "client/request.h"
#include "shared/base/status_macros.h"
#include "shared/sqlite/sqlite_file.h"

namespace outbox::bench {
namespace {

std::vector<OutgoingMessage> MakeBatch(const std::string& queue, const std::string& prefix,
                                       int64_t first, int n) {
  std::vector<OutgoingMessage> batch;
  batch.reserve(n);
  for (int i = 0; i < n; ++i) {
    OutgoingMessage m;
    m.topic = queue;
    m.message_id = absl::StrCat(prefix, first + i);
    m.body.assign(kPayloadBytes, 'b');
    batch.push_back(std::move(m));
  }
  return batch;
}

}  // namespace

std::string RandomKey(absl::BitGen& gen) {
  return absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(gen), absl::Uniform<uint64_t>(gen));
}

ScratchTable::ScratchTable(SQLite::Database& db) : db_(db), payload_(kPayloadBytes, 'p') {
  db_.exec(
      "CREATE TABLE t (id INTEGER PRIMARY KEY, k TEXT NOT NULL UNIQUE, payload BLOB NOT NULL)");
  insert_ = std::make_unique<SQLite::Statement>(db_, "INSERT INTO t (k, payload) VALUES (?, ?)");
}

ScratchTable::~ScratchTable() = default;

void ScratchTable::Commit(int rows) {
  db_.exec("BEGIN IMMEDIATE");
  for (int i = 0; i < rows; ++i) {
    insert_->bind(1, RandomKey(gen_));
    insert_->bind(2, payload_.data(), static_cast<int>(payload_.size()));
    insert_->exec();
    insert_->reset();
  }
  db_.exec("COMMIT");
}

absl::Status WithScratchWriter(const std::string& dir, const std::string& label,
                               const std::function<absl::Status(SQLite::Database& db)>& body) {
  const std::string path =
      absl::StrCat(dir, "/", absl::StrReplaceAll(label, {{" ", "_"}}), "_", getpid(), ".db");
  auto remove_files = [&] {
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
  };
  remove_files();
  DbOptions options;  // the services' default: WAL, synchronous=FULL
  options.durability = Durability::kFull;
  absl::Status s;
  {
    ASSIGN_OR_RETURN(auto file, OpenSqliteFile(path, options, nullptr));
    s = file->WithWriter(label, body);
  }
  remove_files();
  return s;
}

absl::StatusOr<SqliteBaseline> MeasureSqlite(const std::string& dir, absl::Duration each) {
  SqliteBaseline out;
  RETURN_IF_ERROR(WithScratchWriter(dir, "sqlite baseline", [&](SQLite::Database& db) {
    ScratchTable table(db);
    auto run = [&](int rows_per_tx) {
      int64_t txs = 0;
      const absl::Time start = absl::Now();
      const absl::Time end = start + each;
      absl::Time now = start;
      while (now < end) {
        table.Commit(rows_per_tx);
        ++txs;
        now = absl::Now();
      }
      return static_cast<double>(txs) / absl::ToDoubleSeconds(now - start);
    };
    out.tx2_per_s = run(2);
    const double cpu_before = ThreadCpuSeconds();
    const absl::Time before = absl::Now();
    out.rows_per_s_tx100 = run(100) * 100;
    const double rows = out.rows_per_s_tx100 * absl::ToDoubleSeconds(absl::Now() - before);
    out.cpu_us_per_row = 1e6 * (ThreadCpuSeconds() - cpu_before) / rows;
    return absl::OkStatus();
  }));
  return out;
}

namespace {

constexpr int kBrokerWindow = 256;

// The consuming side of the broker baseline: takes and acks (`multiple`)
// until `published` (-1 while publishing) messages are consumed, giving up
// 30 s after the publisher is done.
struct RawConsumer {
  AmqpConnection& sub;
  const std::atomic<int64_t>& published;
  int64_t consumed = 0;
  absl::Time last_consumed;

  absl::Status Run() {
    absl::Time drain_deadline = absl::InfiniteFuture();
    while (true) {
      const int64_t target = published.load();
      if (target >= 0) {
        if (consumed >= target) return absl::OkStatus();
        if (drain_deadline == absl::InfiniteFuture()) {
          drain_deadline = absl::Now() + absl::Seconds(30);
        }
        if (absl::Now() > drain_deadline) {
          return absl::DeadlineExceededError("raw consume did not drain");
        }
      }
      ASSIGN_OR_RETURN(auto got, sub.NextDeliveries(kBrokerWindow, absl::Milliseconds(100)));
      if (got.empty()) continue;
      consumed += static_cast<int64_t>(got.size());
      last_consumed = absl::Now();
      RETURN_IF_ERROR(sub.Ack(got.back().delivery_tag, /*multiple=*/true));
    }
  }
};

}  // namespace

absl::StatusOr<BrokerBaseline> MeasureBroker(const AmqpUrl& url, absl::Duration time,
                                             int broker_pid) {
  const std::string queue = absl::StrCat("bench.raw.", getpid());
  ASSIGN_OR_RETURN(auto pub, AmqpConnection::Connect(url, "outbox-bench-raw-publish"));
  RETURN_IF_ERROR(pub->DeclareQueue(queue, ""));
  RETURN_IF_ERROR(pub->EnableConfirms());
  ASSIGN_OR_RETURN(auto sub, AmqpConnection::Connect(url, "outbox-bench-raw-consume"));
  RETURN_IF_ERROR(sub->Consume(queue, kBrokerWindow));

  std::atomic<int64_t> published{-1};  // final count once the publisher is done
  RawConsumer raw{*sub, published};
  absl::Status consumer_status;
  const double broker_cpu_before = broker_pid > 0 ? CpuSeconds(broker_pid) : NAN;
  const absl::Time start = absl::Now();
  std::thread consumer([&] { consumer_status = raw.Run(); });
  int64_t confirmed = 0;
  int64_t sent = 0;
  absl::Status publish_status;
  while (absl::Now() - start < time) {
    auto ok =
        pub->PublishConfirmed(MakeBatch(queue, "raw-", sent, kBrokerWindow), absl::Seconds(30));
    if (!ok.ok()) {
      publish_status = ok.status();
      break;
    }
    sent += kBrokerWindow;
    confirmed += std::count(ok->begin(), ok->end(), true);
  }
  const absl::Time publish_end = absl::Now();
  published.store(publish_status.ok() ? confirmed : 0);
  consumer.join();
  const double broker_cpu = broker_pid > 0 ? CpuSeconds(broker_pid) - broker_cpu_before : NAN;
  (void)pub->DeleteQueue(queue);
  (void)pub->DeleteQueue(Topology::DeadLetterQueue(queue));
  RETURN_IF_ERROR(publish_status);
  RETURN_IF_ERROR(consumer_status);
  BrokerBaseline out;
  out.publish_per_s = static_cast<double>(confirmed) / absl::ToDoubleSeconds(publish_end - start);
  out.flow_per_s =
      static_cast<double>(raw.consumed) / absl::ToDoubleSeconds(raw.last_consumed - start);
  out.cpu_us_per_message = Div(1e6 * broker_cpu, static_cast<double>(raw.consumed));
  return out;
}

absl::StatusOr<double> MeasureNaive(const std::string& dir, const AmqpUrl& url,
                                    absl::Duration time) {
  const std::string queue = absl::StrCat("bench.naive.", getpid());
  ASSIGN_OR_RETURN(auto conn, AmqpConnection::Connect(url, "outbox-bench-naive"));
  RETURN_IF_ERROR(conn->DeclareQueue(queue, ""));
  RETURN_IF_ERROR(conn->EnableConfirms());
  absl::BitGen gen;
  const std::string payload(kPayloadBytes, 'p');
  int64_t items = 0;
  const absl::Time start = absl::Now();
  absl::Time now = start;
  absl::Status s = WithScratchWriter(dir, "naive baseline", [&](SQLite::Database& db) {
    db.exec(
        "CREATE TABLE payment (id INTEGER PRIMARY KEY, k TEXT NOT NULL UNIQUE, payload BLOB NOT "
        "NULL);"
        "CREATE TABLE msg (id INTEGER PRIMARY KEY, k TEXT NOT NULL UNIQUE, payload BLOB NOT NULL,"
        "                  sent INTEGER NOT NULL DEFAULT 0)");
    SQLite::Statement pay(db, "INSERT INTO payment (k, payload) VALUES (?, ?)");
    SQLite::Statement msg(db, "INSERT INTO msg (k, payload) VALUES (?, ?)");
    SQLite::Statement mark(db, "UPDATE msg SET sent = 1 WHERE k = ?");
    while (now - start < time) {
      const std::string key = RandomKey(gen);
      RETURN_IF_ERROR(WriteTransaction(db, [&] {
        pay.bind(1, key);
        pay.bind(2, payload.data(), static_cast<int>(payload.size()));
        pay.exec();
        pay.reset();
        msg.bind(1, key);
        msg.bind(2, payload.data(), static_cast<int>(payload.size()));
        msg.exec();
        msg.reset();
        return absl::OkStatus();
      }));
      std::vector<OutgoingMessage> one = MakeBatch(queue, "naive-", items, 1);
      ASSIGN_OR_RETURN(std::vector<bool> ok, conn->PublishConfirmed(one, absl::Seconds(10)));
      if (!ok[0]) return absl::UnavailableError("naive baseline: publish not confirmed");
      RETURN_IF_ERROR(WriteTransaction(db, [&] {
        mark.bind(1, key);
        mark.exec();
        mark.reset();
        return absl::OkStatus();
      }));
      ++items;
      now = absl::Now();
    }
    return absl::OkStatus();
  });
  (void)conn->DeleteQueue(queue);
  (void)conn->DeleteQueue(Topology::DeadLetterQueue(queue));
  RETURN_IF_ERROR(s);
  return static_cast<double>(items) / absl::ToDoubleSeconds(now - start);
}

absl::StatusOr<GrpcBaseline> MeasureGrpc(int concurrency, int channels, absl::Duration time) {
  ASSIGN_OR_RETURN(std::unique_ptr<TrivialServerProcess> server, TrivialServerProcess::Start());
  std::vector<std::unique_ptr<PaymentStub>> stubs;
  for (int i = 0; i < channels; ++i) {
    stubs.push_back(::payment::v1::PaymentService::NewStub(
        client::NewChannel(absl::StrCat("127.0.0.1:", server->port()))));
  }
  const CpuMeter cpu({{"trivial gRPC server", "grpc_server", server->pid()}});
  DriveResult r;
  {
    CreateDriver driver(std::move(stubs), client::RandomRunId());
    r = driver.ClosedLoop(concurrency, absl::Milliseconds(500), time);
  }
  const double server_cpu = cpu.Used()[0];
  if (r.failed > 0) return absl::UnavailableError(absl::StrCat("gRPC baseline: ", r.first_error));
  GrpcBaseline out;
  out.calls_per_s = static_cast<double>(r.ok_in_window) / absl::ToDoubleSeconds(time);
  out.server_cpu_us_per_call = Div(1e6 * server_cpu, static_cast<double>(r.ok_all));
  return out;
}

}  // namespace outbox::bench
