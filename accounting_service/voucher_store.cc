#include "accounting_service/voucher_store.h"

#include "absl/strings/str_cat.h"
#include "accounting_service/accounting_db_schema.h"
#include "shared/base/status_macros.h"
#include "shared/sqlite/sqlite_metrics.h"

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

VoucherStore::VoucherStore(std::unique_ptr<SqliteFile> db, IdGenerator& ids, const Clock& clock)
    : ids_(ids),
      clock_(clock),
      db_(std::move(db)),
      inbox_(*db_->writer, kInbox),
      by_payment_(*db_->writer, "SELECT voucher_id FROM vouchers WHERE payment_id = ?"),
      insert_voucher_(*db_->writer, R"sql(
        INSERT INTO vouchers (voucher_id, payment_id, message_id, debit_account, credit_account,
                              amount_minor, currency, created_at, traceparent)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?))sql") {}

absl::StatusOr<std::unique_ptr<VoucherStore>> VoucherStore::Open(const std::string& path,
                                                                 const DbOptions& options,
                                                                 IdGenerator& ids,
                                                                 const Clock& clock) {
  ASSIGN_OR_RETURN(auto db, OpenSqliteFile(path, options, &AccountingDbSchema()));
  return std::unique_ptr<VoucherStore>(new VoucherStore(std::move(db), ids, clock));
}

absl::StatusOr<std::vector<ApplyOutcome>> VoucherStore::ApplyBatch(
    const std::vector<PaymentEvent>& events) {
  MutexLock lock(&db_->write_mu);
  SQLite::Database& db = *db_->writer;
  std::vector<ApplyOutcome> outcomes;
  const int64_t now = clock_.NowMillis();
  absl::Status applied = WriteTransaction(db, [&]() -> absl::Status {
    outcomes.assign(events.size(), ApplyOutcome{});
    SQLite::Statement& by_payment = by_payment_;
    SQLite::Statement& insert_voucher = insert_voucher_;
    by_payment.tryReset();  // an earlier batch's error must not rethrow here
    insert_voucher.tryReset();
    for (size_t i = 0; i < events.size(); ++i) {
      const PaymentEvent& e = events[i];
      ApplyOutcome& out = outcomes[i];
      if (std::optional<std::string> voucher = inbox_.Find(e.message_id)) {
        out.voucher_id = std::move(*voucher);
        out.duplicate = true;
        continue;
      }

      by_payment.bind(1, e.payment_id);
      if (by_payment.executeStep()) {
        // Another message for a payment already booked: remember this message
        // too, but book nothing.
        out.voucher_id = by_payment.getColumn(0).getString();
        out.duplicate = true;
      }
      by_payment.reset();
      if (!out.duplicate) {
        out.voucher_id = ids_.NewId();
        insert_voucher.bind(1, out.voucher_id);
        insert_voucher.bind(2, e.payment_id);
        insert_voucher.bind(3, e.message_id);
        insert_voucher.bind(4, e.payer_account);
        insert_voucher.bind(5, e.payee_account);
        insert_voucher.bind(6, static_cast<int64_t>(e.amount_minor));
        insert_voucher.bind(7, e.currency);
        insert_voucher.bind(8, static_cast<int64_t>(now));
        insert_voucher.bind(9, e.traceparent);
        insert_voucher.exec();
        insert_voucher.reset();
      }
      inbox_.Record(e.message_id, e.payment_id, out.voucher_id, now);
    }
    return absl::OkStatus();
  });
  // Nothing left mid-step past the transaction (a stale read snapshot would
  // refuse every later write).
  by_payment_.tryReset();
  insert_voucher_.tryReset();
  RETURN_IF_ERROR(applied);
  return outcomes;
}

absl::StatusOr<std::vector<std::optional<std::string>>> VoucherStore::Booked(
    const std::vector<PaymentEvent>& events) {
  MutexLock lock(&db_->read_mu);
  std::vector<std::optional<std::string>> booked(events.size());
  RETURN_IF_ERROR(Guard("find booked payments", [&] {
    SQLite::Transaction snapshot(*db_->reader, SQLite::TransactionBehavior::DEFERRED);
    SQLite::Statement by_message(
        *db_->reader, absl::StrCat("SELECT ", kInbox.reference_column, " FROM ", kInbox.table,
                                   " WHERE message_id = ?"));
    SQLite::Statement by_payment(*db_->reader,
                                 "SELECT voucher_id FROM vouchers WHERE payment_id = ?");
    for (size_t i = 0; i < events.size(); ++i) {
      by_message.bind(1, events[i].message_id);
      if (by_message.executeStep()) booked[i] = by_message.getColumn(0).getString();
      by_message.reset();
      if (booked[i]) continue;
      by_payment.bind(1, events[i].payment_id);
      if (by_payment.executeStep()) booked[i] = by_payment.getColumn(0).getString();
      by_payment.reset();
    }
    return absl::OkStatus();
  }));
  return booked;
}

absl::StatusOr<int> VoucherStore::PruneProcessed(int64_t cutoff_ms, int limit) {
  return SqliteProcessedLog(*db_, kInbox).PruneProcessed(cutoff_ms, limit);
}

absl::StatusOr<Voucher> VoucherStore::GetByPayment(const std::string& payment_id) {
  MutexLock lock(&db_->read_mu);
  Voucher v;
  bool found = false;
  RETURN_IF_ERROR(Guard("get voucher", [&] {
    SQLite::Statement s(*db_->reader, absl::StrCat(kSelect, "WHERE payment_id = ?"));
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
  MutexLock lock(&db_->read_mu);
  std::vector<Voucher> rows;
  RETURN_IF_ERROR(Guard("list vouchers", [&] {
    SQLite::Statement s(*db_->reader, absl::StrCat(kSelect, "WHERE id > ? ORDER BY id LIMIT ?"));
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
