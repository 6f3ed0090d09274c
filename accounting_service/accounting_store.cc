#include "accounting_service/accounting_store.h"

#include <utility>

#include "accounting_service/pg_voucher_store.h"
#include "accounting_service/voucher_handler.h"
#include "accounting_service/voucher_store.h"
#include "shared/base/status_macros.h"
#include "shared/postgres/pg_connection.h"

namespace outbox::accounting {
namespace {

class SqliteAccountingStore final : public AccountingStore {
 public:
  SqliteAccountingStore(std::string path, std::unique_ptr<VoucherStore> store, const Clock& clock,
                        BookingRules rules)
      : path_(std::move(path)),
        store_(std::move(store)),
        handler_(*store_, clock, std::move(rules)) {}
  VoucherReads& reads() override { return *store_; }
  ConsumerHandler& handler() override { return handler_; }
  void RegisterMetrics(MetricsRegistry& metrics) const override {
    store_->RegisterMetrics(metrics);
  }
  const std::string& where() const override { return path_; }

 private:
  const std::string path_;
  std::unique_ptr<VoucherStore> store_;
  VoucherHandler handler_;
};

class PgAccountingStore final : public AccountingStore {
 public:
  PgAccountingStore(std::string redacted, std::unique_ptr<PgVoucherStore> store, const Clock& clock,
                    BookingRules rules)
      : redacted_(std::move(redacted)),
        store_(std::move(store)),
        handler_(*store_, clock, std::move(rules)) {}
  VoucherReads& reads() override { return *store_; }
  ConsumerHandler& handler() override { return handler_; }
  void RegisterMetrics(MetricsRegistry&) const override {}
  const std::string& where() const override { return redacted_; }

 private:
  const std::string redacted_;
  std::unique_ptr<PgVoucherStore> store_;
  PgVoucherHandler handler_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<AccountingStore>> OpenAccountingStore(const std::string& setting,
                                                                     const DbOptions& db_options,
                                                                     IdGenerator& ids,
                                                                     const Clock& clock,
                                                                     BookingRules rules) {
  if (IsPgConninfo(setting)) {
    ASSIGN_OR_RETURN(auto store, PgVoucherStore::Open(setting, ids, clock));
    return std::unique_ptr<AccountingStore>(
        new PgAccountingStore(RedactConninfo(setting), std::move(store), clock, std::move(rules)));
  }
  ASSIGN_OR_RETURN(auto store, VoucherStore::Open(setting, db_options, ids, clock));
  return std::unique_ptr<AccountingStore>(
      new SqliteAccountingStore(setting, std::move(store), clock, std::move(rules)));
}

}  // namespace outbox::accounting
