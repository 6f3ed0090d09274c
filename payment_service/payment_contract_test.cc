// The outbox seams' contract (shared/testing/outbox_contract.h) on
// payment.db: payment_service's PaymentWriter (acks in its group commit)
// and recovery's RecoveryStore, as the two services share the file.
#include "shared/testing/outbox_contract.h"

#include <memory>

#include "payment_service/payment_store.h"
#include "payment_service/payment_writer.h"
#include "service_kit/payment_db_schema.h"
#include "shared/base/ids.h"
#include "shared/sqlite/audit.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/sqlite/recovery_store.h"
#include "shared/testing/sequential_ids.h"
#include "shared/testing/temp_dir.h"

namespace outbox::payment {
namespace {

using ::outbox::testing::ManualClock;
using ::outbox::testing::OutboxContractTest;
using ::outbox::testing::OutboxImpl;
using ::outbox::testing::OutboxUnderTest;

class NoRelay final : public RelayQueue {
 public:
  using RelayQueue::Enqueue;
  void Enqueue(std::vector<OutgoingMessage>, absl::Time) override {}
};

struct PaymentDb {
  TempDir dir{"payment_contract"};
  std::unique_ptr<PaymentStore> store;
  ::outbox::testing::SequentialIds ids;
  MetricsRegistry metrics;
  NoRelay relay;
  std::unique_ptr<PaymentWriter> writer;
  std::unique_ptr<RecoveryStore> recovery;
  std::unique_ptr<SQLite::Database> raw;
  ~PaymentDb() {
    if (writer) writer->Stop();
  }
};

OutboxUnderTest MakePaymentDb(ManualClock& clock) {
  auto p = std::make_shared<PaymentDb>();
  const std::string path = p->dir.path() + "/payment.db";
  auto store = PaymentStore::Open(path, DbOptions{});
  EXPECT_OK(store);
  if (!store.ok()) return {};
  p->store = std::move(store).value();
  p->writer =
      std::make_unique<PaymentWriter>(*p->store, clock, p->ids, p->metrics, WriterOptions{});
  p->writer->Start(p->relay);
  auto recovery = RecoveryStore::Open(path, DbOptions{}, PaymentProducerDb());
  EXPECT_OK(recovery);
  if (!recovery.ok()) return {};
  p->recovery = std::move(recovery).value();
  p->raw = std::make_unique<SQLite::Database>(path, SQLite::OPEN_READWRITE);
  p->raw->setBusyTimeout(5000);
  OutboxUnderTest t;
  t.outbox = p->writer.get();
  t.recovery = p->recovery.get();
  t.add = [p](const OutboxMessage& row) { OutboxInserter(*p->raw).Insert(row); };
  t.get = [p](const std::string& id) { return OutboxStateTable(*p->raw).Load(id); };
  auto strings = [p](const std::string& sql) {
    std::vector<std::string> out;
    SQLite::Statement stmt(*p->raw, sql);
    while (stmt.executeStep()) out.push_back(stmt.getColumn(0).getString());
    return out;
  };
  auto watermark = [p](const std::string& table) -> int64_t {
    SQLite::Statement stmt(*p->raw, "SELECT pruned_before FROM outbox_retention WHERE name = ?");
    stmt.bind(1, table);
    return stmt.executeStep() ? stmt.getColumn(0).getInt64() : 0;
  };
  t.archived = [strings] {
    return strings("SELECT message_id FROM outbox_archive ORDER BY rowid");
  };
  t.add_audit = [p](int64_t at, const std::string& action) {
    AppendAudit(*p->raw, AuditRecord{0, at, "alice", action, "target", false, 1, "ok"});
  };
  t.audit = [strings] { return strings("SELECT action FROM outbox_audit ORDER BY id"); };
  t.archive_pruned_before = [watermark] { return watermark("outbox_archive"); };
  t.audit_pruned_before = [watermark] { return watermark("outbox_audit"); };
  t.owner = p;
  return t;
}

INSTANTIATE_TEST_SUITE_P(Payment, OutboxContractTest,
                         ::testing::Values(OutboxImpl{"PaymentWriterAndRecoveryStore",
                                                      MakePaymentDb}),
                         ::outbox::testing::OutboxImplName);

}  // namespace
}  // namespace outbox::payment
