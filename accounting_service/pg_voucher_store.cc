#include "accounting_service/pg_voucher_store.h"

#include <map>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "accounting_service/voucher_store.h"
#include "shared/base/status_macros.h"
#include "shared/postgres/pg_outbox_table.h"

namespace outbox::accounting {
namespace {

constexpr char kSelect[] =
    "SELECT id, voucher_id, payment_id, message_id, debit_account, credit_account, "
    "amount_minor, currency, created_at, traceparent FROM vouchers ";

int64_t Int(absl::string_view text) {
  int64_t v = 0;
  (void)absl::SimpleAtoi(text, &v);
  return v;
}

Voucher ReadVoucher(const PgResult& r, int row) {
  Voucher v;
  v.id = Int(r.Get(row, 0));
  v.voucher_id = std::string(r.Get(row, 1));
  v.payment_id = std::string(r.Get(row, 2));
  v.message_id = std::string(r.Get(row, 3));
  v.debit_account = std::string(r.Get(row, 4));
  v.credit_account = std::string(r.Get(row, 5));
  v.amount_minor = Int(r.Get(row, 6));
  v.currency = std::string(r.Get(row, 7));
  v.created_at = Int(r.Get(row, 8));
  v.traceparent = std::string(r.Get(row, 9));
  return v;
}

// 1: accounting.db's tables as of its version 3 (accounting_db_schema.cc).
absl::Status CreateVouchersAndProcessed(PgConnection& conn) {
  RETURN_IF_ERROR(conn.Exec(R"sql(
    CREATE TABLE vouchers (
      id             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      voucher_id     TEXT   NOT NULL UNIQUE,
      payment_id     TEXT   NOT NULL UNIQUE,
      message_id     TEXT   NOT NULL,
      debit_account  TEXT   NOT NULL,
      credit_account TEXT   NOT NULL,
      amount_minor   BIGINT NOT NULL CHECK (amount_minor > 0),
      currency       TEXT   NOT NULL,
      created_at     BIGINT NOT NULL,
      traceparent    TEXT   NOT NULL DEFAULT ''
    ))sql"));
  return CreatePgInboxTable(conn, kInbox.table);
}

}  // namespace

const PgSchema& AccountingPgSchema() {
  static const PgSchema* const schema =
      new PgSchema{"accounting", {{"vouchers and processed_messages", CreateVouchersAndProcessed}}};
  return *schema;
}

PgHandlerOptions AccountingPgHandlerOptions() {
  PgHandlerOptions options;
  options.inbox_table = kInbox.table;
  options.applied_by_key = kVouchersByPayment;
  return options;
}

absl::StatusOr<std::unique_ptr<PgVoucherStore>> PgVoucherStore::Open(const std::string& conninfo,
                                                                     IdGenerator& ids,
                                                                     const Clock& clock) {
  PgConnection::Options options;
  options.application_name = "accounting_service";
  ASSIGN_OR_RETURN(auto session, PgSession::Open(conninfo, options));
  RETURN_IF_ERROR(UpgradePgSchema(*session, AccountingPgSchema()));
  ASSIGN_OR_RETURN(auto reads, PgSession::Open(conninfo, options));
  return std::unique_ptr<PgVoucherStore>(
      new PgVoucherStore(std::move(session), std::move(reads), ids, clock));
}

absl::StatusOr<std::string> PgVoucherStore::Book(PgConnection& tx, const PaymentEvent& e) {
  // ON CONFLICT waits for another transaction booking the same payment;
  // once that one commits, its voucher is the payment's.
  ASSIGN_OR_RETURN(PgResult inserted,
                   tx.Query(R"sql(
        INSERT INTO vouchers (voucher_id, payment_id, message_id, debit_account, credit_account,
                              amount_minor, currency, created_at, traceparent)
        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
        ON CONFLICT (payment_id) DO NOTHING
        RETURNING voucher_id)sql",
                            {ids_.NewId(), e.payment_id, e.message_id, e.payer_account,
                             e.payee_account, absl::StrCat(e.amount_minor), e.currency,
                             absl::StrCat(clock_.NowMillis()), e.traceparent}));
  if (inserted.rows() == 1) return std::string(inserted.Get(0, 0));
  ASSIGN_OR_RETURN(
      PgResult booked,
      tx.Query("SELECT voucher_id FROM vouchers WHERE payment_id = $1", {e.payment_id}));
  if (booked.rows() == 0) {
    return absl::AbortedError(absl::StrCat("payment ", e.payment_id, " booked and gone"));
  }
  return std::string(booked.Get(0, 0));
}

absl::StatusOr<std::vector<std::string>> PgVoucherStore::BookAll(
    PgConnection& tx, const std::vector<const PaymentEvent*>& events) {
  std::vector<std::string> voucher_ids, payment_ids, message_ids, debits, credits, amounts,
      currencies, times, traceparents;
  const std::string now = absl::StrCat(clock_.NowMillis());
  for (const PaymentEvent* e : events) {
    voucher_ids.push_back(ids_.NewId());
    payment_ids.push_back(e->payment_id);
    message_ids.push_back(e->message_id);
    debits.push_back(e->payer_account);
    credits.push_back(e->payee_account);
    amounts.push_back(absl::StrCat(e->amount_minor));
    currencies.push_back(e->currency);
    times.push_back(now);
    traceparents.push_back(e->traceparent);
  }
  // As Book, row by row in the events' order: ON CONFLICT waits for another
  // transaction booking the same payment; once that one commits, its
  // voucher is the payment's.
  ASSIGN_OR_RETURN(
      PgResult inserted,
      tx.Query(R"sql(
        INSERT INTO vouchers (voucher_id, payment_id, message_id, debit_account, credit_account,
                              amount_minor, currency, created_at, traceparent)
        SELECT v, p, m, d, c, a::bigint, cur, t::bigint, tp
        FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                    $7::text[], $8::text[], $9::text[]) WITH ORDINALITY
             AS e (v, p, m, d, c, a, cur, t, tp, n)
        ORDER BY n
        ON CONFLICT (payment_id) DO NOTHING
        RETURNING payment_id, voucher_id)sql",
               {PgTextArray(voucher_ids), PgTextArray(payment_ids), PgTextArray(message_ids),
                PgTextArray(debits), PgTextArray(credits), PgTextArray(amounts),
                PgTextArray(currencies), PgTextArray(times), PgTextArray(traceparents)}));
  std::map<std::string, std::string> by_payment;
  for (int i = 0; i < inserted.rows(); ++i)
    by_payment.emplace(inserted.Get(i, 0), inserted.Get(i, 1));
  std::vector<std::string> booked_before;
  for (const std::string& p : payment_ids) {
    if (!by_payment.count(p)) booked_before.push_back(p);
  }
  if (!booked_before.empty()) {
    ASSIGN_OR_RETURN(PgResult booked,
                     tx.Query("SELECT payment_id, voucher_id FROM vouchers WHERE payment_id = "
                              "ANY($1::text[])",
                              {PgTextArray(booked_before)}));
    for (int i = 0; i < booked.rows(); ++i) by_payment.emplace(booked.Get(i, 0), booked.Get(i, 1));
  }
  std::vector<std::string> references;
  for (const std::string& p : payment_ids) {
    auto found = by_payment.find(p);
    if (found == by_payment.end()) {
      return absl::AbortedError(absl::StrCat("payment ", p, " booked and gone"));
    }
    references.push_back(found->second);
  }
  return references;
}

absl::StatusOr<Voucher> PgVoucherStore::GetByPayment(const std::string& payment_id) {
  std::optional<Voucher> v;
  RETURN_IF_ERROR(reads_->Transaction("get voucher", [&](PgConnection& conn) -> absl::Status {
    ASSIGN_OR_RETURN(PgResult r,
                     conn.Query(absl::StrCat(kSelect, "WHERE payment_id = $1"), {payment_id}));
    if (r.rows() > 0) v = ReadVoucher(r, 0);
    return absl::OkStatus();
  }));
  if (!v) return absl::NotFoundError(absl::StrCat("no voucher for payment '", payment_id, "'"));
  return *std::move(v);
}

absl::StatusOr<VoucherPage> PgVoucherStore::List(int64_t after_id, int limit) {
  std::vector<Voucher> rows;
  RETURN_IF_ERROR(reads_->Transaction("list vouchers", [&](PgConnection& conn) -> absl::Status {
    rows.clear();
    ASSIGN_OR_RETURN(PgResult r, conn.Query(absl::StrCat(kSelect,
                                                         "WHERE id > $1 ORDER BY id "
                                                         "LIMIT $2"),
                                            {absl::StrCat(after_id), absl::StrCat(limit + 1)}));
    for (int i = 0; i < r.rows(); ++i) rows.push_back(ReadVoucher(r, i));
    return absl::OkStatus();
  }));
  return MakePage(std::move(rows), limit, [](const Voucher& v) { return v.id; });
}

}  // namespace outbox::accounting
