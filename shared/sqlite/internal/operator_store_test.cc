// OperatorStore under the operator's contract suite (operator_contract.h),
// which PgOperatorStore runs too, on a producer's file beside the loop's
// RecoveryStore.
#include "shared/testing/operator_contract.h"

#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include <SQLiteCpp/SQLiteCpp.h>

#include "shared/sqlite/internal/history.h"
#include "shared/sqlite/internal/operator_store.h"
#include "shared/sqlite/internal/recovery_store.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/testing/producer_file_fixture.h"

namespace outbox::testing {
namespace {

// The file, the loop's store and the operator's verbs on it, and a raw
// connection that writes rows as any producer would.
struct SqliteOperatorStores {
  std::string dir;
  std::unique_ptr<RecoveryStore> store;
  std::unique_ptr<OperatorStore> ops;
  std::unique_ptr<SQLite::Database> raw;
  bool poisoned = false;
  ~SqliteOperatorStores() {
    raw.reset();
    ops.reset();
    store.reset();
    std::filesystem::remove_all(dir);
  }
};

OperatorUnderTest MakeSqlite() {
  auto s = std::make_shared<SqliteOperatorStores>();
  char tmpl[] = "/tmp/operator_store_test.XXXXXX";
  s->dir = mkdtemp(tmpl);
  const std::string path = s->dir + "/orders.db";
  CreateProducerDb(path);
  auto store = RecoveryStore::Open(path, DbOptions{}, Producer());
  EXPECT_OK(store);
  if (!store.ok()) return {};
  s->store = std::move(store).value();
  s->ops = std::make_unique<OperatorStore>(*s->store);
  s->raw = std::make_unique<SQLite::Database>(path, SQLite::OPEN_READWRITE);
  SQLite::Database* const raw = s->raw.get();
  SqliteOperatorStores* const stores = s.get();
  OperatorUnderTest t;
  t.ops = s->ops.get();
  t.store = s->store.get();
  t.add = [raw](const OutboxMessage& row) { OutboxInserter(*raw).Insert(row); };
  t.reject = [raw](const std::vector<Rejection>& rejects, int64_t now_ms) {
    SQLite::Transaction tx(*raw);
    const int changed = RecordRejects(*raw, rejects, now_ms);
    tx.commit();
    return changed;
  };
  t.exec = [raw](const std::string& sql) { raw->exec(sql); };
  t.add_history = [raw](const std::string& id, int64_t at, const std::string& instance,
                        const std::string& event, const std::string& detail) {
    HistoryLog(*raw).Append(id, at, instance, event, detail);
  };
  // A deferred foreign key, broken by a trigger on the row's update.
  t.fail_commit_of = [raw, stores](const std::string& message_id) {
    if (!stores->poisoned) {
      raw->exec(R"sql(
        CREATE TABLE parent (id INTEGER PRIMARY KEY);
        CREATE TABLE child (p INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);
        CREATE TABLE poisoned (message_id TEXT);
        CREATE TRIGGER poison AFTER UPDATE ON outbox
          WHEN new.message_id IN (SELECT message_id FROM poisoned)
          BEGIN INSERT INTO child VALUES (42); END;
        INSERT INTO poisoned VALUES ('');
      )sql");
      stores->poisoned = true;
    }
    SQLite::Statement set(*raw, "UPDATE poisoned SET message_id = ?1");
    set.bind(1, message_id);
    set.exec();
  };
  t.owner = s;
  return t;
}

INSTANTIATE_TEST_SUITE_P(Sqlite, OperatorContractTest,
                         ::testing::Values(OperatorImpl{"OperatorStore", MakeSqlite}),
                         OperatorImplName);

// What only the file has: its SQLite metrics beside the rows' gauges.
TEST(OperatorStoreTest, MetricsIncludeTheFilesOwn) {
  OperatorUnderTest t = MakeSqlite();
  ASSERT_NE(t.ops, nullptr);
  ManualClock clock(100'000);
  MetricsRegistry metrics;
  t.ops->RegisterMetrics(metrics, clock);
  const std::string text = metrics.Render();
  EXPECT_NE(text.find("outbox_rows{status=\"SENDING\"} 0\n"), std::string::npos) << text;
  EXPECT_NE(text.find("outbox_sqlite_wal_bytes"), std::string::npos) << text;
}

}  // namespace
}  // namespace outbox::testing
