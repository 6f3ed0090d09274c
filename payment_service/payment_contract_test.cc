// The outbox seams' contract (shared/testing/outbox_contract.h) on
// payment.db: the producer's GroupWriter (acks in its group commit), as
// payment_service runs it, and recovery's RecoveryStore, as the two services
// share the file.
#include "shared/testing/outbox_contract.h"

#include <memory>

#include "payment_service/payment_store.h"
#include "service_kit/payment_db_schema.h"
#include "shared/base/internal/ids.h"
#include "shared/sqlite/internal/group_writer.h"
#include "shared/sqlite/internal/recovery_store.h"
#include "shared/sqlite/internal/sqlite_outbox.h"
#include "shared/testing/sequential_ids.h"
#include "shared/testing/sqlite_under_test.h"
#include "shared/testing/temp_dir.h"

namespace outbox::payment {
namespace {

using ::outbox::testing::ManualClock;
using ::outbox::testing::OutboxContractTest;
using ::outbox::testing::OutboxImpl;
using ::outbox::testing::OutboxUnderTest;
using ::outbox::testing::SqliteOutboxUnderTest;

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
  std::unique_ptr<SqliteOutbox> outbox;
  std::unique_ptr<GroupWriter> writer;
  std::unique_ptr<RecoveryStore> recovery;
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
  p->outbox = std::make_unique<SqliteOutbox>(p->store->file(), clock);
  p->writer = std::make_unique<GroupWriter>(p->store->file(), *p->outbox, p->relay, clock,
                                            p->metrics, GroupWriterOptions{});
  p->writer->Start();
  auto recovery = RecoveryStore::Open(path, DbOptions{}, PaymentProducerDb());
  EXPECT_OK(recovery);
  if (!recovery.ok()) return {};
  p->recovery = std::move(recovery).value();
  return SqliteOutboxUnderTest(path, p->writer.get(), p->recovery.get(), p);
}

INSTANTIATE_TEST_SUITE_P(Payment, OutboxContractTest,
                         ::testing::Values(OutboxImpl{"GroupWriterAndRecoveryStore",
                                                      MakePaymentDb}),
                         ::outbox::testing::OutboxImplName);

}  // namespace
}  // namespace outbox::payment
