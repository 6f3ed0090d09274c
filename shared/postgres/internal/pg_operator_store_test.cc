// PgOperatorStore under the operator's contract suite (shared/testing/
// operator_contract.h), the suite OperatorStore runs on a SQLite file,
// beside PgRecoveryStore on the same database. One server of
// scripts/postgres_node.sh for the whole binary; each test gets a schema of
// its own (search_path) in its database.
#include "shared/testing/operator_contract.h"

#include <memory>
#include <string>

#include "shared/postgres/internal/pg_operator_store.h"
#include "shared/postgres/internal/pg_recovery_store.h"
#include "shared/postgres/pg_connection.h"
#include "shared/postgres/pg_outbox_table.h"
#include "shared/postgres/pg_schema.h"
#include "shared/postgres/pg_session.h"
#include "shared/testing/pg_servers.h"

namespace outbox::testing {
namespace {

PgServersEnvironment* const kServer = AddPgServers("pg_operator_store_test");

// The operator's store and the loop's, each on a connection of its own as
// recovery_service opens them, and the test's connection, which writes rows
// as the producer would.
struct PgOperatorStores {
  std::unique_ptr<PgSession> recovery_session;
  std::unique_ptr<PgSession> ops_session;
  std::unique_ptr<PgConnection> test;
  std::unique_ptr<PgRecoveryStore> store;
  std::unique_ptr<PgOperatorStore> ops;
  bool poisoned = false;
};

OperatorUnderTest MakePg() {
  const std::string conninfo = kServer->FreshSchema("%20-clock_timeout%3D10s");
  auto s = std::make_shared<PgOperatorStores>();
  auto recovery = PgSession::Open(conninfo);
  auto ops = PgSession::Open(conninfo);
  auto test = PgConnection::Open(conninfo);
  EXPECT_OK(recovery);
  EXPECT_OK(ops);
  EXPECT_OK(test);
  if (!recovery.ok() || !ops.ok() || !test.ok()) return {};
  s->recovery_session = std::move(recovery).value();
  s->ops_session = std::move(ops).value();
  s->test = std::move(test).value();
  EXPECT_OK(UpgradePgSchema(*s->recovery_session, PgOutboxSchema()));
  s->store = std::make_unique<PgRecoveryStore>(*s->recovery_session);
  s->ops = std::make_unique<PgOperatorStore>(*s->ops_session);
  PgConnection* const conn = s->test.get();
  PgOperatorStores* const stores = s.get();
  OperatorUnderTest t;
  t.ops = s->ops.get();
  t.store = s->store.get();
  t.add = [conn](const OutboxMessage& row) { EXPECT_OK(InsertPgOutboxRow(*conn, row)); };
  t.reject = [conn](const std::vector<Rejection>& rejects, int64_t now_ms) {
    EXPECT_OK(conn->Exec("BEGIN"));
    auto changed = PgRecordRejects(*conn, rejects, now_ms, nullptr);
    EXPECT_OK(changed);
    EXPECT_OK(conn->Exec(changed.ok() ? "COMMIT" : "ROLLBACK"));
    return changed.ok() ? *changed : -1;
  };
  t.exec = [conn](const std::string& sql) { EXPECT_OK(conn->Exec(sql)); };
  t.add_history = [conn](const std::string& id, int64_t at, const std::string& instance,
                         const std::string& event, const std::string& detail) {
    EXPECT_OK(AppendPgHistory(*conn, id, at, instance, event, detail));
  };
  // A deferred foreign key, broken by a trigger on the row's update.
  t.fail_commit_of = [conn, stores](const std::string& message_id) {
    if (!stores->poisoned) {
      EXPECT_OK(conn->Exec(R"sql(
        CREATE TABLE parent (id INTEGER PRIMARY KEY);
        CREATE TABLE child (p INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED);
        CREATE TABLE poisoned (message_id TEXT);
        INSERT INTO poisoned VALUES ('');
        CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN
            IF new.message_id IN (SELECT message_id FROM poisoned) THEN
              INSERT INTO child VALUES (42);
            END IF;
            RETURN new;
          END $$;
        CREATE TRIGGER poison AFTER UPDATE ON outbox FOR EACH ROW EXECUTE FUNCTION poison();
      )sql"));
      stores->poisoned = true;
    }
    EXPECT_OK(conn->Query("UPDATE poisoned SET message_id = $1", {message_id}));
  };
  t.owner = s;
  return t;
}

INSTANTIATE_TEST_SUITE_P(Postgres, OperatorContractTest,
                         ::testing::Values(OperatorImpl{"PgOperatorStore", MakePg}),
                         OperatorImplName);

// No SQLite file, so none of its metrics: the rows' gauges only.
TEST(PgOperatorStoreTest, MetricsAreTheRowsOnly) {
  OperatorUnderTest t = MakePg();
  ASSERT_NE(t.ops, nullptr);
  ManualClock clock(100'000);
  MetricsRegistry metrics;
  t.ops->RegisterMetrics(metrics, clock);
  const std::string text = metrics.Render();
  EXPECT_NE(text.find("outbox_rows{status=\"SENDING\"} 0\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("outbox_sqlite_"), std::string::npos) << text;
}

}  // namespace
}  // namespace outbox::testing
