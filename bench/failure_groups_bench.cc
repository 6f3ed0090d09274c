// The operator's calls over a large failure: ROWS FAILED rows of one reject
// reason (and a few of another) in an outbox of SENT ones, then
// FailureGroups, a dry-run re-drive of the big group, the re-drive itself
// in pages of --page rows (each page one transaction, with its history
// events and the audit record kept in step), and an acknowledge of the
// other group. Prints the time of each call, the average page (the write
// transaction a creator waits behind at most, on average), and this
// process's peak RSS.
//
//   failure_groups_bench [--rows=100000] [--sent=400000] [--page=1000] [--dir=/tmp]
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "shared/outbox/internal/state_machine.h"
#include "shared/sqlite/internal/operator_store.h"
#include "shared/sqlite/internal/recovery_store.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/sqlite/schema.h"
#include "shared/sqlite/sqlite_file.h"

ABSL_FLAG(int, rows, 100000, "FAILED rows in the big group");
ABSL_FLAG(int, sent, 400000, "SENT rows around them");
ABSL_FLAG(int, page, 1000, "rows per re-drive transaction");
ABSL_FLAG(std::string, dir, "", "where the database goes (default $TMPDIR or /tmp)");

namespace outbox::bench {
namespace {

const DbSchema& Schema() {
  static const DbSchema* const schema = new DbSchema{{{"outbox tables", CreateOutboxTable}}};
  return *schema;
}

double PeakRssMib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss / 1024.0;
}

void Fill(const std::string& path, int sent, int failed) {
  SQLite::Database db(path, SQLite::OPEN_READWRITE);
  SQLite::Transaction tx(db);
  OutboxInserter insert(db);
  RetryPolicy policy;
  std::vector<Rejection> rejects;
  for (int i = 0; i < sent + failed + 50; ++i) {
    const std::string id = absl::StrCat("m-", i);
    OutboxMessage row = NewOutboxMessage(
        {id, "order", absl::StrCat("o-", i), "orders", "OrderPlaced", "replies", "payload"},
        1'700'000'000'000 + i, policy);
    if (i < sent) {
      row.status = OutboxStatus::kSent;
      row.sent_at = row.created_at + 5;
    } else if (i < sent + failed) {
      rejects.push_back({id, absl::StrCat("amount ", 1000 + i, " over the limit of 1000")});
    } else {
      rejects.push_back({id, absl::StrCat("currency 'X", i % 10, "' is not kept")});
    }
    insert.Insert(row);
  }
  RecordRejects(db, rejects, 1'700'000'100'000);
  tx.commit();
}

template <typename F>
double Seconds(F&& f) {
  const absl::Time start = absl::Now();
  f();
  return absl::ToDoubleSeconds(absl::Now() - start);
}

int Run() {
  const int rows = absl::GetFlag(FLAGS_rows);
  const int sent = absl::GetFlag(FLAGS_sent);
  const int page = absl::GetFlag(FLAGS_page);
  std::string dir = absl::GetFlag(FLAGS_dir);
  if (dir.empty()) dir = getenv("TMPDIR") != nullptr ? getenv("TMPDIR") : "/tmp";
  const std::string path = absl::StrCat(dir, "/failure_groups_bench.", getpid(), ".db");
  {
    auto file = OpenSqliteFile(path, DbOptions{}, &Schema());
    if (!file.ok()) {
      std::fprintf(stderr, "%s\n", file.status().ToString().c_str());
      return 1;
    }
  }
  const double fill = Seconds([&] { Fill(path, sent, rows); });
  auto store = RecoveryStore::Open(path, DbOptions{}, ProducerDb{&Schema()});
  if (!store.ok()) {
    std::fprintf(stderr, "%s\n", store.status().ToString().c_str());
    return 1;
  }
  OperatorStore ops(**store);
  std::vector<FailureGroup> groups;
  const double list = Seconds([&] { groups = *(*store)->FailureGroups(100, ""); });
  const std::string big = groups.at(0).group;
  const std::string small = groups.at(1).group;
  int64_t counted = 0, redriven = 0, acknowledged = 0;
  const double dry = Seconds([&] { counted = *ops.RedriveFailed(big, true, 1, "bench"); });
  const double redrive =
      Seconds([&] { redriven = *ops.RedriveFailed(big, false, 2, "bench", page); });
  const double ack =
      Seconds([&] { acknowledged = *ops.AcknowledgeGroup(small, false, 3, "bench", page); });
  std::printf(
      "failure_groups_bench: %d FAILED rows of one group (+%d in %zu other group(s)) in %d SENT, "
      "pages of %d\n",
      rows, 50, groups.size() - 1, sent, page);
  std::printf("  fill (one transaction)             %8.2f s\n", fill);
  std::printf("  FailureGroups: %zu groups           %8.3f s\n", groups.size(), list);
  std::printf("  re-drive dry run: %lld rows      %8.3f s\n", static_cast<long long>(counted), dry);
  const int pages = (rows + page - 1) / page + 1;
  std::printf("  re-drive: %lld rows              %8.3f s  (%d transactions, %.1f ms each)\n",
              static_cast<long long>(redriven), redrive, pages, 1e3 * redrive / pages);
  std::printf("  acknowledge the other group: %lld %8.3f s\n", static_cast<long long>(acknowledged),
              ack);
  std::printf("  audit records: %zu; peak RSS %.1f MiB\n", ops.Audit(0, 100)->size(), PeakRssMib());
  store->reset();
  std::filesystem::remove(path);
  std::filesystem::remove(path + "-wal");
  std::filesystem::remove(path + "-shm");
  return 0;
}

}  // namespace
}  // namespace outbox::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return outbox::bench::Run();
}
