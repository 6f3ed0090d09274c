// claim_bench: how long recovery's claim of the due rows takes when the outbox
// is big. Fills a fresh payment.db with --rows SENT rows and --due SENDING
// rows whose next_retry_at has passed (spread evenly through the table, so
// only an index finds them cheaply), then times RecoveryStore::ClaimDue of
// those rows several times, re-arming them in between, prints the claim's
// query plan and checks that it uses the (status, next_retry_at) index.
#include <SQLiteCpp/SQLiteCpp.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "service_kit/payment_db_schema.h"
#include "shared/base/status_macros.h"
#include "shared/sqlite/internal/recovery_store.h"
#include "shared/sqlite/sqlite_file.h"

ABSL_FLAG(int64_t, rows, 5000000, "SENT rows in the outbox");
ABSL_FLAG(int, due, 1000, "SENDING rows due for a retry; the claim takes this many at once");
ABSL_FLAG(bool, due_at_end, false,
          "put the due rows after the SENT ones (recent payments) instead of spread evenly "
          "through the table (the default: each claimed row then dirties its own page)");
ABSL_FLAG(int, repeats, 5, "timed claims (the rows are re-armed before each)");
ABSL_FLAG(int, payload_bytes, 100, "payload size of each row");
ABSL_FLAG(std::string, dir, "", "where payment.db is created (default $TMPDIR or /tmp)");
ABSL_FLAG(bool, keep, false, "keep the database file afterwards");
ABSL_FLAG(std::string, db, "",
          "the database file (default DIR/claim_bench_PID_payment.db); with --reuse, a file "
          "kept by an earlier --keep run is used as it is and kept again");
ABSL_FLAG(bool, reuse, false,
          "use --db as it is when it exists (no fill; its SENDING rows are the due ones)");
ABSL_FLAG(bool, compare_scan, true,
          "also time the claim's SELECT alone, via the index and NOT INDEXED (a table scan)");

namespace outbox::bench {
namespace {

constexpr char kIndex[] = "outbox_status_next_retry";
constexpr int64_t kRowsPerTransaction = 100000;

std::string MessageId(int64_t n) {
  // UUID-shaped, but ascending, so the fill appends to the unique indexes.
  return absl::StrFormat("00000000-0000-4000-8000-%012d", n);
}

struct Filled {
  std::vector<int64_t> due_ids;
  int64_t total_rows = 0;
};

// Binds row n of the fill: a SENDING row due a minute ago, or a SENT one.
void BindRow(SQLite::Statement& insert, int64_t n, bool is_due, int64_t created, int64_t now_ms,
             const std::string& payload) {
  insert.bind(1, MessageId(n));
  insert.bind(2, absl::StrFormat("p-%012d", n));  // ascending too
  insert.bind(3, payload.data(), static_cast<int>(payload.size()));
  if (is_due) {
    insert.bind(4, "SENDING");
    insert.bind(5, static_cast<int64_t>(now_ms - 60000));  // due a minute ago
    insert.bind(6, created);
    insert.bind(7, created);
    insert.bind(8, created);
    insert.bind(9, static_cast<int64_t>(0));
  } else {
    insert.bind(4, "SENT");
    insert.bind(5, created + 5000);
    insert.bind(6, created);
    insert.bind(7, created);
    insert.bind(8, created + 15);
    insert.bind(9, created + 15);
  }
}

// Bulk fill with one prepared INSERT, big transactions and no durability:
// the file is a fixture, not data.
absl::StatusOr<Filled> Fill(const std::string& path, int64_t rows, int due, bool due_at_end,
                            int payload_bytes, int64_t now_ms) {
  Filled out;
  RETURN_IF_ERROR(CatchSqlite("fill", [&]() -> absl::Status {
    SQLite::Database db(path, SQLite::OPEN_READWRITE | SQLite::OPEN_CREATE);
    db.exec("PRAGMA journal_mode=OFF");
    db.exec("PRAGMA synchronous=OFF");
    db.exec("PRAGMA cache_size=-262144");  // 256 MiB: the indexes stay in memory while filling
    RETURN_IF_ERROR(UpgradeSchema(db, path, PaymentDbSchema()));
    SQLite::Statement insert(db, R"sql(
      INSERT INTO outbox (message_id, biz_type, biz_key, topic, payload, status, attempts,
                          max_attempts, next_retry_at, last_attempt_at, last_error,
                          created_at, updated_at, sent_at)
      VALUES (?, 'payment', ?, 'PAY_QUEUE', ?, ?, 1, 10, ?, ?, '', ?, ?, ?))sql");
    const std::string payload(static_cast<size_t>(payload_bytes), 'x');
    const int64_t total = rows + due;
    // One due row after every `stride` SENT rows.
    const int64_t stride = due_at_end ? total + 1 : std::max<int64_t>(1, rows / due);
    int64_t sent_left = rows;
    int due_left = due;
    int64_t in_tx = 0;
    db.exec("BEGIN");
    for (int64_t n = 0; n < total; ++n) {
      const bool is_due = due_left > 0 && (sent_left == 0 || (n + 1) % (stride + 1) == 0);
      const int64_t created = now_ms - (total - n) * 10;  // one row per 10 ms, oldest first
      BindRow(insert, n, is_due, created, now_ms, payload);
      if (is_due) {
        --due_left;
      } else {
        --sent_left;
      }
      insert.exec();
      insert.reset();
      if (is_due) out.due_ids.push_back(db.getLastInsertRowid());
      if (++in_tx == kRowsPerTransaction) {
        db.exec("COMMIT");
        db.exec("BEGIN");
        in_tx = 0;
      }
      if ((n + 1) % 1000000 == 0) {
        std::printf("  filled %lld rows\n", static_cast<long long>(n + 1));
        std::fflush(stdout);
      }
    }
    db.exec("COMMIT");
    db.exec("PRAGMA journal_mode=WAL");  // as the services leave it
    out.total_rows = total;
    return absl::OkStatus();
  }));
  return out;
}

// A file kept by an earlier run: its SENDING rows are the due ones.
absl::StatusOr<Filled> Reused(const std::string& path) {
  Filled out;
  RETURN_IF_ERROR(CatchSqlite("reuse", [&]() -> absl::Status {
    SQLite::Database db(path, SQLite::OPEN_READONLY);
    SQLite::Statement due(db, "SELECT id FROM outbox WHERE status = 'SENDING' ORDER BY id");
    while (due.executeStep()) out.due_ids.push_back(due.getColumn(0).getInt64());
    SQLite::Statement count(db, "SELECT MAX(id) FROM outbox");
    if (count.executeStep()) out.total_rows = count.getColumn(0).getInt64();
    return absl::OkStatus();
  }));
  return out;
}

// Puts the due rows back to "SENDING, due a minute ago, attempt 1".
absl::Status Rearm(SQLite::Database& db, const std::vector<int64_t>& ids, int64_t now_ms) {
  return WriteTransaction(db, [&] {
    SQLite::Statement stmt(db, R"sql(
      UPDATE outbox SET status = 'SENDING', attempts = 1, next_retry_at = ?1, last_error = ''
      WHERE id = ?2)sql");
    for (int64_t id : ids) {
      stmt.bind(1, static_cast<int64_t>(now_ms - 60000));
      stmt.bind(2, static_cast<int64_t>(id));
      stmt.exec();
      stmt.reset();
    }
    return absl::OkStatus();
  });
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

// What the flags ask for, and where.
struct Setup {
  int64_t rows = 0;
  int due = 0;
  int repeats = 0;
  std::string path;    // the payment.db file
  bool reuse = false;  // --reuse and the file exists
  bool keep = false;   // --keep, or a reused file
};

absl::StatusOr<Setup> SetupFromFlags() {
  Setup s;
  s.rows = absl::GetFlag(FLAGS_rows);
  s.due = absl::GetFlag(FLAGS_due);
  s.repeats = absl::GetFlag(FLAGS_repeats);
  if (s.rows < 0 || s.due < 1 || s.repeats < 1 || absl::GetFlag(FLAGS_payload_bytes) < 0) {
    return absl::InvalidArgumentError(
        "--rows >= 0, --due >= 1, --repeats >= 1, --payload_bytes >= 0");
  }
  std::string dir = absl::GetFlag(FLAGS_dir);
  if (dir.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    dir = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp";
  }
  s.path = absl::GetFlag(FLAGS_db).empty()
               ? absl::StrCat(dir, "/claim_bench_", getpid(), "_payment.db")
               : absl::GetFlag(FLAGS_db);
  std::error_code exists_error;
  s.reuse = absl::GetFlag(FLAGS_reuse) && std::filesystem::exists(s.path, exists_error);
  s.keep = absl::GetFlag(FLAGS_keep) || s.reuse;
  return s;
}

void RemoveFiles(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path + suffix).c_str());
}

// The fill writes without syncing: flush what the kernel has not written
// back yet, so the timed claims' fsyncs do not also wait for the fixture's
// writeback.
absl::Status SyncFilled(const std::string& path) {
  const absl::Time sync_start = absl::Now();
  const int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0 || fsync(fd) != 0) {
    if (fd >= 0) close(fd);
    return absl::InternalError(absl::StrCat("fsync ", path, " failed"));
  }
  close(fd);
  std::printf("  %-30s %.1f s\n", "fsync of the filled file",
              absl::ToDoubleSeconds(absl::Now() - sync_start));
  return absl::OkStatus();
}

// The outbox filled (or the reused file read), reported and synced.
absl::StatusOr<Filled> Prepare(const Setup& s) {
  std::printf("== claim_bench: %lld SENT + %d due SENDING rows (%s) in %s ==\n",
              static_cast<long long>(s.rows), s.due,
              absl::GetFlag(FLAGS_due_at_end) ? "due rows last" : "due rows spread evenly",
              s.path.c_str());
  std::fflush(stdout);
  const absl::Time fill_start = absl::Now();
  Filled filled;
  if (s.reuse) {
    ASSIGN_OR_RETURN(filled, Reused(s.path));
  } else {
    ASSIGN_OR_RETURN(filled,
                     Fill(s.path, s.rows, s.due, absl::GetFlag(FLAGS_due_at_end),
                          absl::GetFlag(FLAGS_payload_bytes), absl::ToUnixMillis(fill_start)));
  }
  const double fill_s = absl::ToDoubleSeconds(absl::Now() - fill_start);
  std::error_code size_error;
  const auto bytes = std::filesystem::file_size(s.path, size_error);
  std::printf("  %-30s %lld rows in %.1f s (%.0f rows/s); file %.0f MiB\n",
              s.reuse ? "reused (not filled)" : "fill", static_cast<long long>(filled.total_rows),
              fill_s, s.reuse ? 0.0 : static_cast<double>(filled.total_rows) / fill_s,
              size_error ? 0.0 : static_cast<double>(bytes) / (1 << 20));
  if (!s.reuse) RETURN_IF_ERROR(SyncFilled(s.path));
  if (static_cast<int>(filled.due_ids.size()) != s.due) {
    return absl::FailedPreconditionError(
        absl::StrCat(s.path, " has ", filled.due_ids.size(), " SENDING rows, --due is ", s.due));
  }
  return filled;
}

// Prints the claim's query plan; true when it uses kIndex.
bool PrintClaimPlan(RecoveryStore& store) {
  const std::string plan = store.ExplainClaim();
  for (absl::string_view line : absl::StrSplit(plan, '\n', absl::SkipEmpty())) {
    std::printf("  %-30s %s\n", "claim query plan", std::string(line).c_str());
  }
  const bool uses_index = absl::StrContains(plan, kIndex);
  std::printf("  %-30s %s\n", "uses index",
              uses_index ? absl::StrCat("yes (", kIndex, ")").c_str()
                         : absl::StrCat("NO: WARNING, ", kIndex, " not in the plan").c_str());
  return uses_index;
}

// Times `s.repeats` claims of the due rows, re-armed before each, then one
// with nothing due (the last claim pushed every row's next_retry_at).
absl::Status TimeClaims(RecoveryStore& store, SQLite::Database& side, const Filled& filled,
                        const Setup& s) {
  // As the worker claims: under the lease, which the claim re-checks.
  RetryPolicy policy;
  const std::string holder = "claim_bench";  // the same each run: a --reuse run renews it
  ASSIGN_OR_RETURN(bool leased,
                   store.TryAcquireLease(holder, absl::ToUnixMillis(absl::Now()), 3600000));
  if (!leased) return absl::FailedPreconditionError("could not take the recovery lease");
  std::vector<double> runs_ms;
  for (int i = 0; i < s.repeats; ++i) {
    RETURN_IF_ERROR(Rearm(side, filled.due_ids, absl::ToUnixMillis(absl::Now())));
    const int64_t now_ms = absl::ToUnixMillis(absl::Now());
    const absl::Time start = absl::Now();
    auto claimed = store.ClaimDue(now_ms, s.due, holder, policy);
    const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
    if (!claimed.ok()) return claimed.status();
    const size_t got = claimed->to_publish.size() + claimed->exhausted.size();
    if (got != static_cast<size_t>(s.due)) {
      std::printf("  WARNING: claim %d returned %zu rows, expected %d\n", i + 1, got, s.due);
    }
    runs_ms.push_back(ms);
  }
  std::string runs;
  for (double ms : runs_ms) absl::StrAppend(&runs, absl::StrFormat(" %.2f", ms));
  std::printf("  %-30s min %.2f ms, median %.2f ms (runs:%s)\n",
              absl::StrCat("claim of ", s.due, " due rows").c_str(),
              *std::min_element(runs_ms.begin(), runs_ms.end()), Median(runs_ms), runs.c_str());

  const absl::Time start = absl::Now();
  auto claimed = store.ClaimDue(absl::ToUnixMillis(absl::Now()), s.due, holder, policy);
  const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  if (!claimed.ok()) return claimed.status();
  std::printf("  %-30s %.2f ms (%zu rows)\n", "claim with nothing due", ms,
              claimed->to_publish.size() + claimed->exhausted.size());
  return absl::OkStatus();
}

// The claim's SELECT alone (no UPDATEs, no commit), through the index and
// through a table scan, to show what the index saves.
absl::Status CompareScan(SQLite::Database& side, const Filled& filled, int due) {
  RETURN_IF_ERROR(Rearm(side, filled.due_ids, absl::ToUnixMillis(absl::Now())));
  for (const char* how : {"INDEXED BY outbox_status_next_retry", "NOT INDEXED"}) {
    int64_t found = 0;
    const absl::Time start = absl::Now();
    RETURN_IF_ERROR(CatchSqlite("select", [&] {
      SQLite::Statement select(
          side,
          absl::StrCat(
              "SELECT id FROM outbox ", how,
              " WHERE status = 'SENDING' AND next_retry_at <= ? ORDER BY next_retry_at LIMIT ?"));
      select.bind(1, static_cast<int64_t>(absl::ToUnixMillis(absl::Now())));
      select.bind(2, due);
      while (select.executeStep()) ++found;
      return absl::OkStatus();
    }));
    std::printf("  %-30s %.2f ms (%lld rows)\n",
                absl::StrCat("SELECT only, ", absl::StartsWith(how, "NOT") ? "table scan" : "index")
                    .c_str(),
                absl::ToDoubleMilliseconds(absl::Now() - start), static_cast<long long>(found));
  }
  return absl::OkStatus();
}

absl::Status Run() {
  ASSIGN_OR_RETURN(const Setup s, SetupFromFlags());
  if (!s.reuse) RemoveFiles(s.path);
  ASSIGN_OR_RETURN(const Filled filled, Prepare(s));

  DbOptions options;  // as recovery_service opens it: WAL, synchronous=FULL
  options.durability = Durability::kFull;
  ASSIGN_OR_RETURN(auto store, RecoveryStore::Open(s.path, options, PaymentProducerDb()));
  ASSIGN_OR_RETURN(auto side, OpenDatabase(s.path, options));  // re-arms rows between runs

  const bool uses_index = PrintClaimPlan(*store);
  RETURN_IF_ERROR(TimeClaims(*store, *side, filled, s));
  if (absl::GetFlag(FLAGS_compare_scan)) RETURN_IF_ERROR(CompareScan(*side, filled, s.due));

  store.reset();
  side.reset();
  if (!s.keep) RemoveFiles(s.path);
  std::fflush(stdout);
  if (!uses_index)
    return absl::FailedPreconditionError(absl::StrCat("the claim does not use ", kIndex));
  return absl::OkStatus();
}

}  // namespace
}  // namespace outbox::bench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "claim_bench [--rows=5000000] [--due=1000] [--dir=DIR]\n"
      "Times recovery's claim of the due rows in a big outbox and prints its query plan.");
  absl::ParseCommandLine(argc, argv);
  absl::Status s = outbox::bench::Run();
  if (!s.ok()) {
    std::fprintf(stderr, "claim_bench: %s\n", s.ToString().c_str());
    return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}
