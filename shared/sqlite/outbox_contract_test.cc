// The seams' contracts (shared/testing/outbox_contract.h, inbox_contract.h),
// run against the in-memory fakes and against the library's SQLite stores:
// the producer's SqliteOutbox (alone, and behind its GroupWriter) and
// recovery's RecoveryStore on one file, and the consumer's inbox.
#include "shared/testing/outbox_contract.h"

#include "shared/testing/inbox_contract.h"

#include <memory>
#include <optional>
#include <stdexcept>

#include "shared/sqlite/inbox.h"
#include "shared/sqlite/internal/group_writer.h"
#include "shared/sqlite/internal/recovery_store.h"
#include "shared/sqlite/internal/sqlite_outbox.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/sqlite/sqlite_file.h"
#include "shared/testing/fakes.h"
#include "shared/testing/sqlite_under_test.h"
#include "shared/testing/temp_dir.h"

namespace outbox::testing {
namespace {

OutboxUnderTest MakeFake(ManualClock& clock) {
  auto fake = std::make_shared<InMemoryOutbox>(clock);
  OutboxUnderTest t;
  t.outbox = fake.get();
  t.recovery = fake.get();
  t.add = [fake](const OutboxMessage& row) { fake->Add(row); };
  t.get = [fake](const std::string& id) -> std::optional<OutboxMessage> {
    try {
      return fake->Row(id);
    } catch (const std::out_of_range&) {
      return std::nullopt;
    }
  };
  t.archived = [fake] {
    std::vector<std::string> ids;
    for (const OutboxMessage& row : fake->archive) ids.push_back(row.message_id);
    return ids;
  };
  t.add_audit = [fake](int64_t at, const std::string& action) { fake->audit.emplace(at, action); };
  t.audit = [fake] {
    std::vector<std::string> actions;
    for (const auto& [at, action] : fake->audit) actions.push_back(action);
    return actions;
  };
  t.archive_pruned_before = [fake] { return fake->archive_pruned_before; };
  t.audit_pruned_before = [fake] { return fake->audit_pruned_before; };
  t.owner = fake;
  return t;
}

const DbSchema& ProducerSchema() {
  static const DbSchema* const schema = new DbSchema{{{"outbox tables", CreateOutboxTable}}};
  return *schema;
}

// The relay of a GroupWriter under the contract: the suite publishes nothing.
class NoRelay final : public RelayQueue {
 public:
  using RelayQueue::Enqueue;
  void Enqueue(std::vector<OutgoingMessage>, absl::Time) override {}
};

// SqliteOutbox and RecoveryStore on one file, as a producer and its
// recovery share it; rows written and read on a connection of the test's.
// With a GroupWriter, the producer's seam is the writer (its acks in groups).
struct SqliteStores {
  TempDir dir{"outbox_contract"};
  std::unique_ptr<SqliteFile> file;
  std::unique_ptr<SqliteOutbox> outbox;
  std::unique_ptr<RecoveryStore> recovery;
  NoRelay relay;
  MetricsRegistry metrics;
  std::unique_ptr<GroupWriter> writer;
};

OutboxUnderTest MakeSqlite(ManualClock& clock, bool group_writer) {
  auto s = std::make_shared<SqliteStores>();
  const std::string path = s->dir.path() + "/producer.db";
  auto file = OpenSqliteFile(path, DbOptions{}, &ProducerSchema());
  EXPECT_OK(file);
  if (!file.ok()) return {};
  s->file = std::move(file).value();
  s->outbox = std::make_unique<SqliteOutbox>(*s->file, clock);
  auto recovery = RecoveryStore::Open(path, DbOptions{}, ProducerDb{&ProducerSchema()});
  EXPECT_OK(recovery);
  if (!recovery.ok()) return {};
  s->recovery = std::move(recovery).value();
  OutboxRepository* producer = s->outbox.get();
  if (group_writer) {
    s->writer = std::make_unique<GroupWriter>(*s->file, *s->outbox, s->relay, clock, s->metrics,
                                              GroupWriterOptions{});
    s->writer->Start();
    producer = s->writer.get();
  }
  return SqliteOutboxUnderTest(path, producer, s->recovery.get(), s);
}

INSTANTIATE_TEST_SUITE_P(
    Library, OutboxContractTest,
    ::testing::Values(OutboxImpl{"Fake", MakeFake},
                      OutboxImpl{"SqliteOutboxAndRecoveryStore",
                                 [](ManualClock& clock) { return MakeSqlite(clock, false); }},
                      OutboxImpl{"GroupWriterAndRecoveryStore",
                                 [](ManualClock& clock) { return MakeSqlite(clock, true); }}),
    OutboxImplName);

InboxUnderTest MakeFakeInbox() {
  auto fake = std::make_shared<InMemoryProcessedLog>();
  InboxUnderTest t;
  t.log = fake.get();
  t.add = [fake](const std::string& id, int64_t at) { fake->rows.emplace(at, id); };
  t.count = [fake] { return static_cast<int64_t>(fake->rows.size()); };
  t.has = [fake](const std::string& id) {
    for (const auto& [at, kept] : fake->rows) {
      if (kept == id) return true;
    }
    return false;
  };
  t.owner = fake;
  return t;
}

struct SqliteInbox {
  TempDir dir{"inbox_contract"};
  std::unique_ptr<SqliteFile> file;
  std::unique_ptr<SqliteProcessedLog> log;
};

const DbSchema& ConsumerSchema() {
  static const DbSchema* const schema =
      new DbSchema{{{"inbox", [](SQLite::Database& db) { CreateInboxTable(db); }}}};
  return *schema;
}

InboxUnderTest MakeSqliteInbox() {
  auto s = std::make_shared<SqliteInbox>();
  auto file = OpenSqliteFile(s->dir.path() + "/consumer.db", DbOptions{}, &ConsumerSchema());
  EXPECT_OK(file);
  if (!file.ok()) return {};
  s->file = std::move(file).value();
  s->log = std::make_unique<SqliteProcessedLog>(*s->file);
  return SqliteInboxUnderTest(*s->file, s->log.get(), s);
}

INSTANTIATE_TEST_SUITE_P(Library, InboxContractTest,
                         ::testing::Values(InboxImpl{"Fake", MakeFakeInbox},
                                           InboxImpl{"SqliteProcessedLog", MakeSqliteInbox}),
                         InboxImplName);

}  // namespace
}  // namespace outbox::testing
