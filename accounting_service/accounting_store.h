#pragma once

// Where accounting keeps its ledger, chosen by --accounting_db: a
// postgresql:// or postgres:// URI (IsPgConninfo) books on that PostgreSQL
// database (pg_voucher_store.h), anything else is the path of a SQLite file
// (voucher_store.h). The rest of the service sees only this: the reads the
// gRPC API serves and the consumer's handler that books.
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "accounting_service/voucher.h"
#include "accounting_service/voucher_reads.h"
#include "shared/base/clock.h"
#include "shared/base/internal/ids.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/consumer_handler.h"
#include "shared/sqlite/sqlite_file.h"

namespace outbox::accounting {

class AccountingStore {
 public:
  virtual ~AccountingStore() = default;
  // The gRPC API's reads (GetVoucher, ListVouchers).
  virtual VoucherReads& reads() = 0;
  // The consumer role's handler: decodes, books under `rules`, answers.
  virtual ConsumerHandler& handler() = 0;
  // The store's own metrics (a SQLite file's log; none on PostgreSQL).
  virtual void RegisterMetrics(MetricsRegistry& metrics) const = 0;
  // For logs: the file's path, or the connection string without its password.
  virtual const std::string& where() const = 0;
};

// Opens (creates, upgrades) the store `setting` names; `db_options` apply
// to a SQLite file. A newer database than this build knows is refused
// untouched (FAILED_PRECONDITION). Errors never hold a password.
absl::StatusOr<std::unique_ptr<AccountingStore>> OpenAccountingStore(const std::string& setting,
                                                                     const DbOptions& db_options,
                                                                     IdGenerator& ids,
                                                                     const Clock& clock,
                                                                     BookingRules rules);

}  // namespace outbox::accounting
