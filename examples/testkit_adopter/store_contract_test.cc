// The library's contract suites on the rewards program's own files: the
// outbox seams (SqliteOutbox and RecoveryStore) on rewards.db as
// RewardsSchema makes it, the inbox on ledger.db as LedgerSchema makes it.
// If the schema ever breaks what the library's stores expect, this fails.
#include "shared/testing/outbox_contract.h"

#include "shared/testing/inbox_contract.h"

#include <memory>
#include <optional>

#include "rewards.h"
#include "shared/sqlite/audit.h"
#include "shared/sqlite/inbox.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/sqlite/recovery_store.h"
#include "shared/testing/temp_dir.h"

namespace outbox::testing {
namespace {

struct RewardsStores {
  TempDir dir{"rewards_contract"};
  std::unique_ptr<SqliteFile> file;
  std::unique_ptr<SqliteOutbox> outbox;
  std::unique_ptr<RecoveryStore> recovery;
  std::unique_ptr<SQLite::Database> raw;  // the test's own connection
};

OutboxUnderTest MakeRewardsDb(ManualClock& clock) {
  auto s = std::make_shared<RewardsStores>();
  const std::string path = s->dir.path() + "/rewards.db";
  auto file = OpenSqliteFile(path, DbOptions{}, &rewards::RewardsSchema());
  EXPECT_OK(file);
  if (!file.ok()) return {};
  s->file = std::move(file).value();
  s->outbox = std::make_unique<SqliteOutbox>(*s->file, clock);
  auto recovery = RecoveryStore::Open(path, DbOptions{}, ProducerDb{&rewards::RewardsSchema()});
  EXPECT_OK(recovery);
  if (!recovery.ok()) return {};
  s->recovery = std::move(recovery).value();
  s->raw = std::make_unique<SQLite::Database>(path, SQLite::OPEN_READWRITE);
  s->raw->setBusyTimeout(5000);
  OutboxUnderTest t;
  t.outbox = s->outbox.get();
  t.recovery = s->recovery.get();
  t.add = [s](const OutboxMessage& row) { OutboxInserter(*s->raw).Insert(row); };
  t.get = [s](const std::string& id) { return OutboxStateTable(*s->raw).Load(id); };
  auto strings = [s](const std::string& sql) {
    std::vector<std::string> out;
    SQLite::Statement stmt(*s->raw, sql);
    while (stmt.executeStep()) out.push_back(stmt.getColumn(0).getString());
    return out;
  };
  auto watermark = [s](const std::string& table) -> int64_t {
    SQLite::Statement stmt(*s->raw, "SELECT pruned_before FROM outbox_retention WHERE name = ?");
    stmt.bind(1, table);
    return stmt.executeStep() ? stmt.getColumn(0).getInt64() : 0;
  };
  t.archived = [strings] {
    return strings("SELECT message_id FROM outbox_archive ORDER BY rowid");
  };
  t.add_audit = [s](int64_t at, const std::string& action) {
    AppendAudit(*s->raw, AuditRecord{0, at, "alice", action, "target", false, 1, "ok"});
  };
  t.audit = [strings] { return strings("SELECT action FROM outbox_audit ORDER BY id"); };
  t.archive_pruned_before = [watermark] { return watermark("outbox_archive"); };
  t.audit_pruned_before = [watermark] { return watermark("outbox_audit"); };
  t.owner = s;
  return t;
}

INSTANTIATE_TEST_SUITE_P(Rewards, OutboxContractTest,
                         ::testing::Values(OutboxImpl{"RewardsDb", MakeRewardsDb}), OutboxImplName);

struct LedgerInbox {
  TempDir dir{"ledger_contract"};
  std::unique_ptr<SqliteFile> file;
  std::unique_ptr<SqliteProcessedLog> log;
};

InboxUnderTest MakeLedgerDb() {
  auto s = std::make_shared<LedgerInbox>();
  auto file = OpenSqliteFile(s->dir.path() + "/ledger.db", DbOptions{}, &rewards::LedgerSchema());
  EXPECT_OK(file);
  if (!file.ok()) return {};
  s->file = std::move(file).value();
  s->log = std::make_unique<SqliteProcessedLog>(*s->file);
  InboxUnderTest t;
  t.log = s->log.get();
  t.add = [s](const std::string& id, int64_t at) {
    EXPECT_OK(s->file->Write([&](SQLite::Database& db) {
      Inbox(db).Record(id, "award-" + id, "ledger-" + id, at);
      return absl::OkStatus();
    }));
  };
  t.count = [s] {
    int64_t n = -1;
    EXPECT_OK(s->file->Read("count the inbox", [&](SQLite::Database& db) {
      n = db.execAndGet("SELECT count(*) FROM inbox").getInt64();
      return absl::OkStatus();
    }));
    return n;
  };
  t.has = [s](const std::string& id) {
    bool found = false;
    EXPECT_OK(s->file->Read("find in the inbox", [&](SQLite::Database& db) {
      found = Inbox(db).Find(id).has_value();
      return absl::OkStatus();
    }));
    return found;
  };
  t.owner = s;
  return t;
}

INSTANTIATE_TEST_SUITE_P(Rewards, InboxContractTest,
                         ::testing::Values(InboxImpl{"LedgerDb", MakeLedgerDb}), InboxImplName);

}  // namespace
}  // namespace outbox::testing
