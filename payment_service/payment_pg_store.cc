#include "payment_service/payment_pg_store.h"

#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/postgres/pg_outbox_table.h"

namespace outbox::payment {
namespace {

// After kPgOutboxColumns (ReadPgOutboxRow reads those from column 0).
constexpr int kFirstPaymentColumn = 22;
constexpr char kPaymentColumns[] =
    "p.id, p.payment_id, p.idempotency_key, p.payer_account, p.payee_account, p.amount_minor, "
    "p.currency, p.description, p.created_at";

std::string SelectSql(absl::string_view join, absl::string_view where) {
  return absl::StrCat("SELECT ", kPgOutboxColumns, ", ", kPaymentColumns, " FROM payments p ", join,
                      " outbox o ON o.biz_type = 'payment' AND o.biz_key = p.payment_id ", where);
}

int64_t Int64At(const PgResult& r, int row, int column) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(r.Get(row, column), &v)) return 0;
  return v;
}

// The payment's columns of `row`; its outbox row's when it has one.
PaymentRecord ReadRecord(const PgResult& r, int row) {
  PaymentRecord p;
  int c = kFirstPaymentColumn;
  p.id = Int64At(r, row, c++);
  p.payment_id = std::string(r.Get(row, c++));
  p.input.idempotency_key = std::string(r.Get(row, c++));
  p.input.payer_account = std::string(r.Get(row, c++));
  p.input.payee_account = std::string(r.Get(row, c++));
  p.input.amount_minor = Int64At(r, row, c++);
  p.input.currency = std::string(r.Get(row, c++));
  p.input.description = std::string(r.Get(row, c++));
  p.created_at = Int64At(r, row, c++);
  if (!r.IsNull(row, 0)) p.outbox = ReadPgOutboxRow(r, row);
  return p;
}

constexpr char kCreatePayments[] = R"sql(
    CREATE TABLE payments (
      id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      payment_id      TEXT   NOT NULL UNIQUE,
      idempotency_key TEXT   NOT NULL UNIQUE,
      payer_account   TEXT   NOT NULL,
      payee_account   TEXT   NOT NULL,
      amount_minor    BIGINT NOT NULL CHECK (amount_minor > 0),
      currency        TEXT   NOT NULL,
      description     TEXT   NOT NULL,
      created_at      BIGINT NOT NULL
    ))sql";

}  // namespace

const PgSchema& PaymentPgSchema() {
  static const PgSchema* const schema =
      new PgSchema{"payment",
                   {
                       {"payments", [](PgConnection& conn) { return conn.Exec(kCreatePayments); }},
                   }};
  return *schema;
}

absl::StatusOr<std::unique_ptr<PgPaymentStore>> PgPaymentStore::Open(absl::string_view conninfo) {
  PgConnection::Options options;
  options.application_name = "payment_service";
  ASSIGN_OR_RETURN(std::unique_ptr<PgSession> session, PgSession::Open(conninfo, options));
  // Both versions are read before either schema changes: a database newer
  // than this program in one of them is left as it is.
  const PgSchema* const schemas[] = {&PgOutboxSchema(), &PaymentPgSchema()};
  RETURN_IF_ERROR(session->Transaction("read schema versions", [&](PgConnection& conn) {
    for (const PgSchema* schema : schemas) {
      ASSIGN_OR_RETURN(int version, PgSchemaVersion(conn, schema->name));
      if (version > schema->latest()) {
        return absl::FailedPreconditionError(
            absl::StrCat("the database's schema ", schema->name, " has version ", version,
                         "; this payment_service knows up to ", schema->latest(),
                         ": refusing to open a newer database"));
      }
    }
    return absl::OkStatus();
  }));
  for (const PgSchema* schema : schemas) RETURN_IF_ERROR(UpgradePgSchema(*session, *schema));
  return std::unique_ptr<PgPaymentStore>(new PgPaymentStore(std::move(session)));
}

absl::Status PgPaymentStore::WritePayment(PgConnection& conn, const NewPayment& payment,
                                          CreateOutcome& out) {
  out = CreateOutcome{};  // a group written again starts over
  const PaymentInput& in = payment.input;
  // A key another open transaction has inserted makes this INSERT wait for
  // it: once it commits, nothing is inserted and the SELECT below (a
  // statement of its own, so it sees that commit) finds its row.
  ASSIGN_OR_RETURN(PgResult inserted,
                   conn.Query(R"sql(
      INSERT INTO payments (payment_id, idempotency_key, payer_account, payee_account,
                            amount_minor, currency, description, created_at)
      VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
      ON CONFLICT (idempotency_key) DO NOTHING
      RETURNING id)sql",
                              {payment.payment_id, in.idempotency_key, in.payer_account,
                               in.payee_account, absl::StrCat(in.amount_minor), in.currency,
                               in.description, absl::StrCat(payment.created_at)}));
  if (inserted.rows() == 1) {
    out.record.id = Int64At(inserted, 0, 0);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(
      PgResult found,
      conn.Query(SelectSql("LEFT JOIN", "WHERE p.idempotency_key = $1"), {in.idempotency_key}));
  if (found.rows() != 1) {
    return absl::InternalError(absl::StrCat("insert payment: idempotency_key '", in.idempotency_key,
                                            "' neither inserted nor found"));
  }
  PaymentRecord earlier = ReadRecord(found, 0);
  if (found.IsNull(0, 0)) {
    // A payments row without its outbox row is an earlier write of this
    // same group (another transaction's row is seen only once it committed,
    // with its outbox row): the group's one INSERT adds the rows after the
    // business steps. It commits, or fails, with this write, SENDING.
    earlier.outbox.status = OutboxStatus::kSending;
    earlier.outbox.biz_type = "payment";
    earlier.outbox.biz_key = earlier.payment_id;
  }
  if (!SameRequest(earlier.input, in)) {
    return absl::AlreadyExistsError(absl::StrCat("idempotency_key '", in.idempotency_key,
                                                 "' was already used for a different payment (",
                                                 earlier.payment_id, ")"));
  }
  out.record = std::move(earlier);
  out.replayed = true;
  return absl::AlreadyExistsError(kReplayed);
}

absl::StatusOr<PaymentRecord> PgPaymentStore::Get(const std::string& payment_id) {
  PaymentRecord record;
  bool found = false;
  RETURN_IF_ERROR(session_->Transaction("get payment", [&](PgConnection& conn) {
    ASSIGN_OR_RETURN(PgResult r,
                     conn.Query(SelectSql("JOIN", "WHERE p.payment_id = $1"), {payment_id}));
    found = r.rows() > 0;
    if (found) record = ReadRecord(r, 0);
    return absl::OkStatus();
  }));
  if (!found) return absl::NotFoundError(absl::StrCat("payment '", payment_id, "' not found"));
  return record;
}

absl::StatusOr<PaymentPage> PgPaymentStore::List(std::optional<OutboxStatus> status,
                                                 int64_t after_id, int limit) {
  std::vector<PaymentRecord> rows;
  RETURN_IF_ERROR(session_->Transaction("list payments", [&](PgConnection& conn) {
    rows.clear();
    std::string where = "WHERE p.id > $1";
    std::vector<PgParam> params = {absl::StrCat(after_id),
                                   absl::StrCat(limit + 1)};  // one more: is there a next page?
    if (status.has_value()) {
      where += " AND o.status = $3";
      params.emplace_back(std::string(StatusName(*status)));
    }
    where += " ORDER BY p.id LIMIT $2";
    ASSIGN_OR_RETURN(PgResult r, conn.Query(SelectSql("JOIN", where), params));
    for (int i = 0; i < r.rows(); ++i) rows.push_back(ReadRecord(r, i));
    return absl::OkStatus();
  }));
  return MakePage(std::move(rows), limit, [](const PaymentRecord& r) { return r.id; });
}

PaymentCreator PgPaymentCreator(PgProducer& producer, IdGenerator& ids, const Clock& clock) {
  return PaymentCreator(
      [&producer](MessageSpec spec, std::shared_ptr<const NewPayment> payment,
                  std::shared_ptr<CreateOutcome> outcome, GroupWriter::WriteDone done) {
        producer.WriteAsync(
            std::move(spec),
            [payment, outcome](PgConnection& conn) {
              return PgPaymentStore::WritePayment(conn, *payment, *outcome);
            },
            std::move(done));
      },
      ids, clock);
}

}  // namespace outbox::payment
