#include "accounting_service/voucher_store.h"

#include "absl/strings/str_cat.h"
#include "accounting_service/accounting_db_schema.h"
#include "shared/base/status_macros.h"
#include "shared/sqlite/internal/sqlite_metrics.h"

namespace outbox::accounting {
namespace {

constexpr char kSelect[] =
    "SELECT id, voucher_id, payment_id, message_id, debit_account, credit_account, "
    "amount_minor, currency, created_at, traceparent FROM vouchers ";

Voucher ReadVoucher(SQLite::Statement& s) {
  Voucher v;
  v.id = s.getColumn(0).getInt64();
  v.voucher_id = s.getColumn(1).getString();
  v.payment_id = s.getColumn(2).getString();
  v.message_id = s.getColumn(3).getString();
  v.debit_account = s.getColumn(4).getString();
  v.credit_account = s.getColumn(5).getString();
  v.amount_minor = s.getColumn(6).getInt64();
  v.currency = s.getColumn(7).getString();
  v.created_at = s.getColumn(8).getInt64();
  v.traceparent = s.getColumn(9).getString();
  return v;
}

}  // namespace

VoucherStore::VoucherStore(std::unique_ptr<SqliteFile> db, IdGenerator& ids, const Clock& clock,
                           const SQLite::Database* writer,
                           std::unique_ptr<SQLite::Statement> insert_voucher)
    : ids_(ids),
      clock_(clock),
      db_(std::move(db)),
      writer_(writer),
      insert_voucher_(std::move(insert_voucher)) {}

absl::StatusOr<std::unique_ptr<VoucherStore>> VoucherStore::Open(const std::string& path,
                                                                 const DbOptions& options,
                                                                 IdGenerator& ids,
                                                                 const Clock& clock) {
  ASSIGN_OR_RETURN(auto db, OpenSqliteFile(path, options, &AccountingDbSchema()));
  const SQLite::Database* writer = nullptr;
  std::unique_ptr<SQLite::Statement> insert;
  RETURN_IF_ERROR(db->WithWriter("prepare the voucher insert", [&](SQLite::Database& w) {
    writer = &w;
    insert = std::make_unique<SQLite::Statement>(w, R"sql(
        INSERT INTO vouchers (voucher_id, payment_id, message_id, debit_account, credit_account,
                              amount_minor, currency, created_at, traceparent)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?))sql");
    return absl::OkStatus();
  }));
  return std::unique_ptr<VoucherStore>(
      new VoucherStore(std::move(db), ids, clock, writer, std::move(insert)));
}

absl::StatusOr<std::string> VoucherStore::Book(SQLite::Database& tx, const PaymentEvent& e) {
  if (&tx != writer_) {
    return absl::InternalError("vouchers are booked on accounting.db's writer");
  }
  const std::string voucher_id = ids_.NewId();
  SQLite::Statement& insert = *insert_voucher_;
  insert.tryReset();  // an earlier batch's error must not rethrow here
  insert.bind(1, voucher_id);
  insert.bind(2, e.payment_id);
  insert.bind(3, e.message_id);
  insert.bind(4, e.payer_account);
  insert.bind(5, e.payee_account);
  insert.bind(6, static_cast<int64_t>(e.amount_minor));
  insert.bind(7, e.currency);
  insert.bind(8, static_cast<int64_t>(clock_.NowMillis()));
  insert.bind(9, e.traceparent);
  insert.exec();
  insert.reset();
  return voucher_id;
}

absl::StatusOr<int> VoucherStore::PruneProcessed(int64_t cutoff_ms, int limit) {
  return SqliteProcessedLog(*db_, kInbox).PruneProcessed(cutoff_ms, limit);
}

absl::StatusOr<Voucher> VoucherStore::GetByPayment(const std::string& payment_id) {
  Voucher v;
  bool found = false;
  RETURN_IF_ERROR(db_->Read("get voucher", [&](SQLite::Database& reader) {
    SQLite::Statement s(reader, absl::StrCat(kSelect, "WHERE payment_id = ?"));
    s.bind(1, payment_id);
    if (s.executeStep()) {
      v = ReadVoucher(s);
      found = true;
    }
    return absl::OkStatus();
  }));
  if (!found) return absl::NotFoundError(absl::StrCat("no voucher for payment '", payment_id, "'"));
  return v;
}

absl::StatusOr<VoucherPage> VoucherStore::List(int64_t after_id, int limit) {
  std::vector<Voucher> rows;
  RETURN_IF_ERROR(db_->Read("list vouchers", [&](SQLite::Database& reader) {
    SQLite::Statement s(reader, absl::StrCat(kSelect, "WHERE id > ? ORDER BY id LIMIT ?"));
    s.bind(1, static_cast<int64_t>(after_id));
    s.bind(2, limit + 1);
    while (s.executeStep()) rows.push_back(ReadVoucher(s));
    return absl::OkStatus();
  }));
  return MakePage(std::move(rows), limit, [](const Voucher& v) { return v.id; });
}

void VoucherStore::RegisterMetrics(MetricsRegistry& metrics) const {
  RegisterSqliteFileMetrics(*db_, "accounting", metrics);
}

}  // namespace outbox::accounting
