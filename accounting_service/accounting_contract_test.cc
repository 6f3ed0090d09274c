// The inbox contract (shared/testing/inbox_contract.h) on accounting.db:
// VoucherStore's processed_messages, as the pruner sees it.
#include "shared/testing/inbox_contract.h"

#include <memory>

#include "accounting_service/voucher_store.h"
#include "shared/sqlite/inbox.h"
#include "shared/testing/manual_clock.h"
#include "shared/testing/sequential_ids.h"
#include "shared/testing/temp_dir.h"

namespace outbox::accounting {
namespace {

using ::outbox::testing::InboxContractTest;
using ::outbox::testing::InboxImpl;
using ::outbox::testing::InboxUnderTest;

struct AccountingDb {
  TempDir dir{"accounting_contract"};
  ::outbox::testing::SequentialIds ids;
  ::outbox::testing::ManualClock clock{0};
  std::unique_ptr<VoucherStore> store;
  std::unique_ptr<SQLite::Database> raw;
};

InboxUnderTest MakeVoucherStore() {
  auto a = std::make_shared<AccountingDb>();
  const std::string path = a->dir.path() + "/accounting.db";
  auto store = VoucherStore::Open(path, DbOptions{}, a->ids, a->clock);
  EXPECT_OK(store);
  if (!store.ok()) return {};
  a->store = std::move(store).value();
  a->raw = std::make_unique<SQLite::Database>(path, SQLite::OPEN_READWRITE);
  a->raw->setBusyTimeout(5000);
  InboxUnderTest t;
  t.log = a->store.get();
  t.add = [a](const std::string& id, int64_t at) {
    Inbox(*a->raw, kInbox).Record(id, "p-" + id, "v-" + id, at);
  };
  t.count = [a] {
    return a->raw->execAndGet("SELECT count(*) FROM processed_messages").getInt64();
  };
  t.has = [a](const std::string& id) { return Inbox(*a->raw, kInbox).Find(id).has_value(); };
  t.owner = a;
  return t;
}

INSTANTIATE_TEST_SUITE_P(Accounting, InboxContractTest,
                         ::testing::Values(InboxImpl{"VoucherStore", MakeVoucherStore}),
                         ::outbox::testing::InboxImplName);

}  // namespace
}  // namespace outbox::accounting
