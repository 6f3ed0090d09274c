// PostgreSQL's floor for the outbox: how many 2-row transactions (a
// payment-like row and an outbox row, as PgOutbox::Write commits them) one
// server commits per second, and the CPU each costs, this client's and the
// server's. Prints figures; asserts nothing. Three shapes, each for
// --seconds on fresh tables:
// - serial: one connection, BEGIN, two INSERTs, COMMIT, one after another;
// - parallel: --parallel connections doing the same at once, one thread each;
// - grouped: one connection committing --group payments (2 x --group rows,
//   one INSERT each) per transaction;
// - batched: the same rows per transaction in two INSERTs, one per table,
//   over an array of ids (what a group writer would send);
// - write: PgOutbox::Write from one thread, one payment per call, its
//   payment row the business step;
// - group_writer: PgGroupWriter (shared/postgres/internal/pg_group_writer.h) fed by
//   each count of --writer_threads threads calling Write at once, the same
//   payments.
// The client's CPU is this process's (getrusage: every thread, libpq's
// work included); the server's is read from /proc for each pid of
// --server_pids (a postmaster: itself, its live children, and its children
// that exited and were waited for), so a standby's work can be counted
// beside its primary's. Fresh tables in the schema floor_bench, dropped first.
//
//   pg_floor --conninfo="$(scripts/postgres_node.sh url DIR)" \
//       --server_pids="$(scripts/postgres_node.sh pid DIR)"
// scripts/bench_pg_floor.sh starts the servers and runs it.
#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "shared/base/clock.h"
#include "shared/base/status_macros.h"
#include "shared/observability/metrics.h"
#include "shared/postgres/internal/pg_group_writer.h"
#include "shared/postgres/internal/pg_outbox.h"
#include "shared/postgres/pg_connection.h"
#include "shared/postgres/pg_schema.h"
#include "shared/postgres/pg_session.h"

ABSL_FLAG(std::string, conninfo, "", "libpq connection string (a passfile, not a password)");
ABSL_FLAG(std::string, server_pids, "",
          "comma-separated postmaster pids whose CPU (with their children's) is counted");
ABSL_FLAG(double, seconds, 5, "how long each shape runs");
ABSL_FLAG(int, parallel, 8, "connections committing at once in the parallel shape");
ABSL_FLAG(int, group, 64, "payments per commit in the grouped shape");
ABSL_FLAG(std::string, shapes, "serial,parallel,grouped,batched,write,group_writer",
          "the shapes to run, comma-separated, in this order");
ABSL_FLAG(std::vector<std::string>, writer_threads, std::vector<std::string>({"8", "32"}),
          "comma-separated: threads calling PgGroupWriter::Write, one group_writer run each");

namespace outbox::bench {
namespace {

double TicksPerSecond() {
  static const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  return ticks;
}

// Fields of /proc/PID/stat after the command (which may hold spaces):
// field 3 (state) is [0].
std::vector<std::string> StatFields(int pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return {};
  return absl::StrSplit(text.substr(close + 2), ' ', absl::SkipEmpty());
}

double Field(const std::vector<std::string>& f, int number) {  // number as in proc(5)
  double v = 0;
  const size_t i = static_cast<size_t>(number - 3);
  return i < f.size() && absl::SimpleAtod(f[i], &v) ? v : 0;
}

// A postmaster's CPU seconds so far: its own, its exited children's that it
// waited for, and its live children's.
double ServerCpuSeconds(int postmaster) {
  const std::vector<std::string> own = StatFields(postmaster);
  if (own.empty()) return NAN;
  double ticks = Field(own, 14) + Field(own, 15) + Field(own, 16) + Field(own, 17);
  if (DIR* proc = opendir("/proc")) {
    while (dirent* e = readdir(proc)) {
      int pid = 0;
      if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
      const std::vector<std::string> f = StatFields(pid);
      if (f.empty() || static_cast<int>(Field(f, 4)) != postmaster) continue;
      ticks += Field(f, 14) + Field(f, 15);
    }
    closedir(proc);
  }
  return ticks / TicksPerSecond();
}

double ClientCpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto secs = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return secs(u.ru_utime) + secs(u.ru_stime);
}

struct Cpu {
  double client = 0;
  double server = 0;  // NaN when a pid could not be read
};

Cpu CpuNow(const std::vector<int>& pids) {
  Cpu c;
  c.client = ClientCpuSeconds();
  for (int pid : pids) c.server += ServerCpuSeconds(pid);
  return c;
}

absl::StatusOr<std::unique_ptr<PgConnection>> Connect(const std::string& conninfo) {
  ASSIGN_OR_RETURN(std::unique_ptr<PgConnection> conn, PgConnection::Open(conninfo));
  RETURN_IF_ERROR(conn->Exec("SET search_path = floor_bench"));
  return conn;
}

absl::Status FreshTables(const std::string& conninfo) {
  ASSIGN_OR_RETURN(std::unique_ptr<PgConnection> conn, PgConnection::Open(conninfo));
  RETURN_IF_ERROR(
      conn->Exec("SET client_min_messages = warning; DROP SCHEMA IF EXISTS floor_bench CASCADE; "
                 "CREATE SCHEMA floor_bench; SET search_path = floor_bench;"
                 "CREATE TABLE payments (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"
                 " payment_id TEXT NOT NULL UNIQUE, amount BIGINT NOT NULL, currency TEXT NOT NULL,"
                 " status TEXT NOT NULL, created_at BIGINT NOT NULL)"));
  return CreatePgOutboxTables(*conn);  // the library's outbox, its indexes too
}

std::atomic<int64_t> next_id{0};

// `n` payments, each its payment row and its outbox row, in the caller's
// transaction.
absl::Status InsertPayments(PgConnection& conn, int n) {
  const std::string now = std::to_string(absl::ToUnixMillis(absl::Now()));
  for (int i = 0; i < n; ++i) {
    const std::string id = absl::StrCat("p-", next_id++);
    RETURN_IF_ERROR(conn.Query("INSERT INTO payments (payment_id, amount, currency, status,"
                               " created_at) VALUES ($1, 1250, 'EUR', 'CREATED', $2)",
                               {id, now})
                        .status());
    RETURN_IF_ERROR(
        conn.Query("INSERT INTO outbox (message_id, biz_type, biz_key, topic, payload, status,"
                   " max_attempts, next_retry_at, created_at, updated_at) VALUES ($1, 'payment',"
                   " $2, 'payments', $3, 'SENDING', 10, $4, $4, $4)",
                   {absl::StrCat("m-", id), id, std::string(200, 'x'), now})
            .status());
  }
  return absl::OkStatus();
}

// The same rows, two statements for all `n`: each table's rows in one
// INSERT over an array of ids.
absl::Status InsertBatch(PgConnection& conn, int n) {
  const std::string now = std::to_string(absl::ToUnixMillis(absl::Now()));
  std::string ids = "{";
  for (int i = 0; i < n; ++i) absl::StrAppend(&ids, i == 0 ? "" : ",", "p-", next_id++);
  ids += "}";
  RETURN_IF_ERROR(conn.Query("INSERT INTO payments (payment_id, amount, currency, status,"
                             " created_at) SELECT id, 1250, 'EUR', 'CREATED', $2"
                             " FROM unnest($1::text[]) AS id",
                             {ids, now})
                      .status());
  return conn
      .Query(
          "INSERT INTO outbox (message_id, biz_type, biz_key, topic, payload, status,"
          " max_attempts, next_retry_at, created_at, updated_at) SELECT 'm-' || id,"
          " 'payment', id, 'payments', $2, 'SENDING', 10, $3, $3, $3"
          " FROM unnest($1::text[]) AS id",
          {ids, std::string(200, 'x'), now})
      .status();
}

absl::Status Commit(PgConnection& conn, int payments, bool batched) {
  RETURN_IF_ERROR(conn.Exec("BEGIN"));
  RETURN_IF_ERROR(batched ? InsertBatch(conn, payments) : InsertPayments(conn, payments));
  return conn.Exec("COMMIT");
}

// `connections` threads, each committing `payments` per transaction until
// `time` is up; prints one line.
absl::Status Shape(const std::string& name, const std::string& conninfo,
                   const std::vector<int>& pids, int connections, int payments, bool batched,
                   absl::Duration time) {
  RETURN_IF_ERROR(FreshTables(conninfo));
  std::vector<std::unique_ptr<PgConnection>> conns;
  for (int i = 0; i < connections; ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<PgConnection> c, Connect(conninfo));
    conns.push_back(std::move(c));
  }
  std::atomic<int64_t> commits{0};
  std::vector<absl::Status> errors(static_cast<size_t>(connections));
  const Cpu before = CpuNow(pids);
  const absl::Time start = absl::Now();
  const absl::Time end = start + time;
  std::vector<std::thread> threads;
  for (int i = 0; i < connections; ++i) {
    threads.emplace_back([&, i] {
      while (absl::Now() < end) {
        absl::Status s = Commit(*conns[static_cast<size_t>(i)], payments, batched);
        if (!s.ok()) {
          errors[static_cast<size_t>(i)] = s;
          return;
        }
        ++commits;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
  const Cpu after = CpuNow(pids);
  for (const absl::Status& s : errors) RETURN_IF_ERROR(s);
  const double tx = static_cast<double>(commits.load());
  const double paid = tx * payments;
  std::printf(
      "%-9s connections=%d payments/commit=%-3d commits/s=%8.0f payments/s=%8.0f"
      "  client_us/payment=%6.1f  server_us/payment=%7.1f  server_us/commit=%7.1f\n",
      name.c_str(), connections, payments, tx / elapsed, paid / elapsed,
      1e6 * (after.client - before.client) / paid, 1e6 * (after.server - before.server) / paid,
      1e6 * (after.server - before.server) / tx);
  std::fflush(stdout);
  return absl::OkStatus();
}

// Takes the committed messages and drops them.
class NoRelay final : public RelayQueue {
 public:
  using RelayQueue::Enqueue;
  void Enqueue(std::vector<OutgoingMessage>, absl::Time) override {}
};

// `conninfo` with floor_bench as its search_path (a URI or key=value pairs).
std::string InBenchSchema(const std::string& conninfo) {
  if (conninfo.find("://") == std::string::npos) {
    return conninfo + " options=-csearch_path=floor_bench";
  }
  return absl::StrCat(conninfo, conninfo.find('?') == std::string::npos ? "?" : "&",
                      "options=-csearch_path%3Dfloor_bench");
}

// Payments through the library's writers until `time` is up: PgOutbox::Write
// from one thread (`threads` 0), or PgGroupWriter::Write from `threads`
// threads; prints one line.
absl::Status WriterShape(const std::string& name, const std::string& conninfo,
                         const std::vector<int>& pids, int threads, absl::Duration time) {
  RETURN_IF_ERROR(FreshTables(conninfo));
  ASSIGN_OR_RETURN(std::unique_ptr<PgSession> session, PgSession::Open(InBenchSchema(conninfo)));
  SystemClock clock;
  MetricsRegistry metrics;
  NoRelay relay;
  PgOutbox outbox(*session, clock);
  PgGroupWriter writer(*session, outbox, relay, clock, metrics, PgGroupWriterOptions{});
  if (threads > 0) writer.Start();
  auto write = [&]() -> absl::Status {
    const std::string id = absl::StrCat("p-", next_id++);
    const std::string now = std::to_string(absl::ToUnixMillis(absl::Now()));
    auto business = [&](PgConnection& conn) {
      return conn
          .Query(
              "INSERT INTO payments (payment_id, amount, currency, status, created_at)"
              " VALUES ($1, 1250, 'EUR', 'CREATED', $2)",
              {id, now})
          .status();
    };
    MessageSpec spec = MessageSpec::Of("payment", id, std::string(200, 'x'));
    spec.message_id = "m-" + id;
    spec.topic = "payments";
    if (threads == 0) return outbox.Write(spec, business).status();
    return writer.Write(std::move(spec), business).status();
  };
  std::atomic<int64_t> writes{0};
  const int callers = std::max(threads, 1);
  std::vector<absl::Status> errors(static_cast<size_t>(callers));
  const Cpu before = CpuNow(pids);
  const absl::Time start = absl::Now();
  const absl::Time end = start + time;
  std::vector<std::thread> workers;
  for (int i = 0; i < callers; ++i) {
    workers.emplace_back([&, i] {
      while (absl::Now() < end) {
        absl::Status s = write();
        if (!s.ok()) {
          errors[static_cast<size_t>(i)] = s;
          return;
        }
        ++writes;
      }
    });
  }
  for (std::thread& t : workers) t.join();
  writer.Stop();
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - start);
  const Cpu after = CpuNow(pids);
  for (const absl::Status& s : errors) RETURN_IF_ERROR(s);
  const double paid = static_cast<double>(writes.load());
  const double tx = threads > 0 ? static_cast<double>(writer.groups_committed()) : paid;
  std::printf(
      "%-12s threads=%d payments/commit=%5.1f commits/s=%8.0f payments/s=%8.0f"
      "  client_us/payment=%6.1f  server_us/payment=%7.1f  server_us/commit=%7.1f\n",
      name.c_str(), callers, paid / tx, tx / elapsed, paid / elapsed,
      1e6 * (after.client - before.client) / paid, 1e6 * (after.server - before.server) / paid,
      1e6 * (after.server - before.server) / tx);
  std::fflush(stdout);
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string conninfo = absl::GetFlag(FLAGS_conninfo);
  if (conninfo.empty()) {
    std::fprintf(stderr, "pg_floor: --conninfo is required\n");
    return 2;
  }
  std::vector<int> pids;
  for (absl::string_view p :
       absl::StrSplit(absl::GetFlag(FLAGS_server_pids), ',', absl::SkipEmpty())) {
    int pid = 0;
    if (!absl::SimpleAtoi(p, &pid)) {
      std::fprintf(stderr, "pg_floor: --server_pids: not a pid: %s\n", std::string(p).c_str());
      return 2;
    }
    pids.push_back(pid);
  }
  const absl::Duration time = absl::Seconds(absl::GetFlag(FLAGS_seconds));
  std::printf("pg_floor: %s, server pids %s, %g s per shape\n", RedactConninfo(conninfo).c_str(),
              pids.empty() ? "(none: no server CPU)" : absl::GetFlag(FLAGS_server_pids).c_str(),
              absl::GetFlag(FLAGS_seconds));
  const int group = absl::GetFlag(FLAGS_group);
  const std::vector<std::string> shapes =
      absl::StrSplit(absl::GetFlag(FLAGS_shapes), ',', absl::SkipEmpty());
  auto wanted = [&](const std::string& shape) {
    return std::find(shapes.begin(), shapes.end(), shape) != shapes.end();
  };
  absl::Status s;
  if (s.ok() && wanted("serial")) s = Shape("serial", conninfo, pids, 1, 1, false, time);
  if (s.ok() && wanted("parallel")) {
    s = Shape("parallel", conninfo, pids, absl::GetFlag(FLAGS_parallel), 1, false, time);
  }
  if (s.ok() && wanted("grouped")) s = Shape("grouped", conninfo, pids, 1, group, false, time);
  if (s.ok() && wanted("batched")) s = Shape("batched", conninfo, pids, 1, group, true, time);
  if (s.ok() && wanted("write")) s = WriterShape("write", conninfo, pids, 0, time);
  for (const std::string& n : absl::GetFlag(FLAGS_writer_threads)) {
    int threads = 0;
    if (!absl::SimpleAtoi(n, &threads) || threads < 1) {
      std::fprintf(stderr, "pg_floor: --writer_threads: not a count: %s\n", n.c_str());
      return 2;
    }
    if (s.ok() && wanted("group_writer")) {
      s = WriterShape("group_writer", conninfo, pids, threads, time);
    }
  }
  if (!s.ok()) {
    std::fprintf(stderr, "pg_floor: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace outbox::bench

int main(int argc, char** argv) {
  return outbox::bench::Main(argc, argv);
}
