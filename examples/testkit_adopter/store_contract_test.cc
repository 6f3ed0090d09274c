// The library's contract suites on the rewards program's own files: the
// outbox seams (SqliteOutbox and RecoveryStore) on rewards.db as
// RewardsSchema makes it, the inbox on ledger.db as LedgerSchema makes it.
// If the schema ever breaks what the library's stores expect, this fails.
#include "shared/testing/outbox_contract.h"

#include "shared/testing/inbox_contract.h"

#include <memory>
#include <optional>

#include "rewards.h"
#include "shared/sqlite/internal/recovery_store.h"
#include "shared/testing/sqlite_under_test.h"
#include "shared/testing/temp_dir.h"

namespace outbox::testing {
namespace {

struct RewardsStores {
  TempDir dir{"rewards_contract"};
  std::unique_ptr<SqliteFile> file;
  std::unique_ptr<SqliteOutbox> outbox;
  std::unique_ptr<RecoveryStore> recovery;
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
  return SqliteOutboxUnderTest(path, s->outbox.get(), s->recovery.get(), s);
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
  return SqliteInboxUnderTest(*s->file, s->log.get(), s);
}

INSTANTIATE_TEST_SUITE_P(Rewards, InboxContractTest,
                         ::testing::Values(InboxImpl{"LedgerDb", MakeLedgerDb}), InboxImplName);

}  // namespace
}  // namespace outbox::testing
