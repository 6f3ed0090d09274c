#include "payment_service/payment_store.h"

#include "absl/strings/str_cat.h"
#include "payment_service/payment_codec.h"
#include "service_kit/payment_db_schema.h"
#include "shared/base/internal/mutex.h"
#include "shared/base/status_macros.h"
#include "shared/observability/internal/trace.h"
#include "shared/observability/log.h"
#include "shared/sqlite/internal/sqlite_metrics.h"
#include "shared/sqlite/outbox_table.h"

namespace outbox::payment {
namespace {

constexpr char kPaymentColumns[] =
    "p.id, p.payment_id, p.idempotency_key, p.payer_account, p.payee_account, p.amount_minor, "
    "p.currency, p.description, p.created_at";

constexpr char kJoin[] =
    " FROM payments p JOIN outbox o ON o.biz_type = 'payment' AND o.biz_key = p.payment_id ";
// For listing, the join order is fixed by hand (CROSS JOIN): left to itself,
// SQLite drives the join from outbox's (biz_type, biz_key) index, whose
// constant biz_type matches every row, and then sorts the whole table for one
// page.
constexpr char kJoinPaymentsFirst[] =
    " FROM payments p CROSS JOIN outbox o ON o.biz_type = 'payment' AND o.biz_key = p.payment_id ";
constexpr char kJoinOutboxFirst[] =
    " FROM outbox o CROSS JOIN payments p ON o.biz_type = 'payment' AND o.biz_key = p.payment_id ";

PaymentRecord ReadRecord(SQLite::Statement& stmt) {
  PaymentRecord r;
  r.id = stmt.getColumn(0).getInt64();
  r.payment_id = stmt.getColumn(1).getString();
  r.input.idempotency_key = stmt.getColumn(2).getString();
  r.input.payer_account = stmt.getColumn(3).getString();
  r.input.payee_account = stmt.getColumn(4).getString();
  r.input.amount_minor = stmt.getColumn(5).getInt64();
  r.input.currency = stmt.getColumn(6).getString();
  r.input.description = stmt.getColumn(7).getString();
  r.created_at = stmt.getColumn(8).getInt64();
  r.outbox = ReadOutboxMessage(stmt, 9);
  return r;
}

std::string SelectSql(const std::string& where, const char* join = kJoin) {
  return absl::StrCat("SELECT ", kPaymentColumns, ", ", kOutboxColumns, join, where);
}

}  // namespace

// WritePayment's statements, prepared once on the writer connection.
struct PaymentStatements {
  explicit PaymentStatements(SQLite::Database& database)
      : db(database), find(db, SelectSql("WHERE p.idempotency_key = ?")), insert(db, R"sql(
      INSERT INTO payments (payment_id, idempotency_key, payer_account, payee_account,
                            amount_minor, currency, description, created_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?))sql") {}

  // None stays mid-step past a write: it would hold the writer's read
  // snapshot, which goes stale once another process commits.
  void Reset() {
    for (SQLite::Statement* s : {&find, &insert}) {
      s->tryReset();
      s->clearBindings();
    }
  }

  SQLite::Database& db;
  SQLite::Statement find;
  SQLite::Statement insert;
};

namespace {

// An earlier request with the same idempotency key: the same request is
// replayed, a different one refused. OK when the key is new.
absl::Status FindEarlier(SQLite::Statement& find, const NewPayment& item, CreateOutcome& out) {
  find.bind(1, item.input.idempotency_key);
  absl::Status status;
  if (find.executeStep()) {
    PaymentRecord earlier = ReadRecord(find);
    if (SameRequest(earlier.input, item.input)) {
      out.record = std::move(earlier);
      out.replayed = true;
      status = absl::AlreadyExistsError(kReplayed);
    } else {
      status = absl::AlreadyExistsError(
          absl::StrCat("idempotency_key '", item.input.idempotency_key,
                       "' was already used for a different payment (", earlier.payment_id, ")"));
    }
  }
  find.reset();
  return status;
}

}  // namespace

PaymentStore::PaymentStore(std::unique_ptr<SqliteFile> db) : db_(std::move(db)) {}
PaymentStore::~PaymentStore() = default;  // statements_ before db_

absl::StatusOr<std::unique_ptr<PaymentStore>> PaymentStore::Open(const std::string& path,
                                                                 const DbOptions& options) {
  ASSIGN_OR_RETURN(auto db, OpenSqliteFile(path, options, &PaymentDbSchema()));
  return std::unique_ptr<PaymentStore>(new PaymentStore(std::move(db)));
}

absl::Status PaymentStore::WritePayment(SQLite::Database& db, const NewPayment& payment,
                                        CreateOutcome& out) {
  out = CreateOutcome{};  // a retried group starts over
  if (statements_ == nullptr || &statements_->db != &db) {
    statements_ = std::make_unique<PaymentStatements>(db);
  }
  PaymentStatements& s = *statements_;
  try {
    RETURN_IF_ERROR(FindEarlier(s.find, payment, out));
    s.insert.bind(1, payment.payment_id);
    s.insert.bind(2, payment.input.idempotency_key);
    s.insert.bind(3, payment.input.payer_account);
    s.insert.bind(4, payment.input.payee_account);
    s.insert.bind(5, static_cast<int64_t>(payment.input.amount_minor));
    s.insert.bind(6, payment.input.currency);
    s.insert.bind(7, payment.input.description);
    s.insert.bind(8, static_cast<int64_t>(payment.created_at));
    s.insert.exec();
    s.insert.reset();
    out.record.id = db.getLastInsertRowid();
  } catch (const SQLite::Exception& e) {
    s.Reset();
    return SqliteError(e, "insert payment");
  }
  return absl::OkStatus();
}

PaymentCreator::PaymentCreator(WriteAsyncFn write, PaymentStore& store, IdGenerator& ids,
                               const Clock& clock)
    : PaymentCreator(
          [write = std::move(write), &store](
              MessageSpec spec, std::shared_ptr<const NewPayment> payment,
              std::shared_ptr<CreateOutcome> outcome, GroupWriter::WriteDone done) {
            write(
                std::move(spec),
                [&store, payment, outcome](SQLite::Database& db) {
                  return store.WritePayment(db, *payment, *outcome);
                },
                std::move(done));
          },
          ids, clock) {}

void PaymentCreator::CreateAsync(PaymentInput input, std::string traceparent, CreateDone done) {
  auto payment = std::make_shared<NewPayment>();
  payment->input = std::move(input);
  payment->payment_id = ids_.NewId();
  payment->created_at = clock_.NowMillis();
  MessageSpec spec;
  spec.message_id = ids_.NewId();
  spec.biz_type = kBizType;
  spec.biz_key = payment->payment_id;
  spec.message_type = kPaymentCreatedType;
  spec.payload = EncodePaymentCreated(spec.message_id, payment->payment_id, payment->input,
                                      payment->created_at);
  spec.traceparent = std::move(traceparent);
  // Written on the writer thread by the business write, read by the
  // completion after it.
  auto outcome = std::make_shared<CreateOutcome>();
  queue_(std::move(spec), payment, outcome,
         [payment, outcome, done = std::move(done)](absl::StatusOr<OutboxMessage> row) mutable {
           CreateOutcome out = std::move(*outcome);
           if (row.ok()) {
             out.record.payment_id = payment->payment_id;
             out.record.input = std::move(payment->input);
             out.record.created_at = payment->created_at;
             out.record.outbox = std::move(row).value();
             if (LogEnabled(LogLevel::kDebug)) {
               LogDebug("payment_created",
                        {KV("payment_id", out.record.payment_id),
                         KV("message_id", out.record.outbox.message_id),
                         KV("trace_id", TraceIdOf(out.record.outbox.traceparent))});
             }
           } else if (!(out.replayed && absl::IsAlreadyExists(row.status()) &&
                        row.status().message() == kReplayed)) {
             out = CreateOutcome{row.status(), {}, false};
           }
           std::move(done)(std::move(out));
         });
}

CreateOutcome PaymentCreator::Create(const PaymentInput& input, const std::string& traceparent) {
  CreateOutcome outcome;
  Notification done;  // outbox::Notification: TSan sees it (shared/base/internal/mutex.h)
  CreateAsync(input, traceparent, [&](CreateOutcome out) {
    outcome = std::move(out);
    done.Notify();
  });
  done.WaitForNotification();
  return outcome;
}

absl::StatusOr<PaymentRecord> PaymentStore::Get(const std::string& payment_id) {
  PaymentRecord record;
  bool found = false;
  RETURN_IF_ERROR(db_->Read("get payment", [&](SQLite::Database& reader) {
    SQLite::Statement stmt(reader, SelectSql("WHERE p.payment_id = ?"));
    stmt.bind(1, payment_id);
    if (stmt.executeStep()) {
      record = ReadRecord(stmt);
      found = true;
    }
    return absl::OkStatus();
  }));
  if (!found) return absl::NotFoundError(absl::StrCat("payment '", payment_id, "' not found"));
  return record;
}

absl::StatusOr<PaymentPage> PaymentStore::List(std::optional<OutboxStatus> status, int64_t after_id,
                                               int limit) {
  std::vector<PaymentRecord> rows;
  RETURN_IF_ERROR(db_->Read("list payments", [&](SQLite::Database& reader) {
    // SENDING and FAILED rows are few: find them through the status index and
    // sort those. Otherwise walk payments in id order and stop after a page.
    const bool few = status.has_value() && *status != OutboxStatus::kSent;
    std::string where = "WHERE p.id > ?1";
    if (status.has_value()) where += " AND o.status = ?3";
    where += " ORDER BY p.id LIMIT ?2";
    SQLite::Statement stmt(reader, SelectSql(where, few ? kJoinOutboxFirst : kJoinPaymentsFirst));
    stmt.bind(1, static_cast<int64_t>(after_id));
    stmt.bind(2, limit + 1);  // one extra row tells whether another page exists
    if (status.has_value()) stmt.bind(3, std::string(StatusName(*status)));
    while (stmt.executeStep()) rows.push_back(ReadRecord(stmt));
    return absl::OkStatus();
  }));
  return MakePage(std::move(rows), limit, [](const PaymentRecord& r) { return r.id; });
}

void PaymentStore::RegisterMetrics(MetricsRegistry& metrics) const {
  RegisterSqliteFileMetrics(*db_, "payment", metrics);
}

}  // namespace outbox::payment
