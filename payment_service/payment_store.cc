#include "payment_service/payment_store.h"

#include "absl/strings/str_cat.h"
#include "service_kit/failpoints.h"
#include "service_kit/payment_db_schema.h"
#include "shared/base/status_macros.h"
#include "shared/runtime/failpoint.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/sqlite/sqlite_metrics.h"

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

// The statements of the group commit, prepared once on the writer
// connection and reused by every group.
struct GroupStatements {
  explicit GroupStatements(SQLite::Database& database)
      : db(database),
        find(db, SelectSql("WHERE p.idempotency_key = ?")),
        insert(db, R"sql(
      INSERT INTO payments (payment_id, idempotency_key, payer_account, payee_account,
                            amount_minor, currency, description, created_at)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?))sql"),
        outbox(db),
        savepoint(db, "SAVEPOINT one_payment"),
        release(db, "RELEASE one_payment"),
        rollback_to(db, "ROLLBACK TO one_payment"),
        acks(db) {}

  // A statement an exception left mid-step is reset before it is used again.
  void Reset() {
    for (SQLite::Statement* s : {&find, &insert, &savepoint, &release, &rollback_to}) {
      s->tryReset();
      s->clearBindings();
    }
  }

  SQLite::Database& db;
  SQLite::Statement find;
  SQLite::Statement insert;
  OutboxInserter outbox;
  SQLite::Statement savepoint;
  SQLite::Statement release;
  SQLite::Statement rollback_to;
  OutboxStateTable acks;
};

namespace {

void Run(SQLite::Statement& s) {
  s.exec();
  s.reset();
}

// An earlier request with the same idempotency key: the same request is
// replayed, a different one refused. False when the key is new.
bool FoundEarlier(SQLite::Statement& find, const NewPayment& item, CreateOutcome& out) {
  find.bind(1, item.input.idempotency_key);
  const bool exists = find.executeStep();
  if (exists) {
    out.record = ReadRecord(find);
    if (SameRequest(out.record.input, item.input)) {
      out.replayed = true;
    } else {
      out.status = absl::AlreadyExistsError(
          absl::StrCat("idempotency_key '", item.input.idempotency_key,
                       "' was already used for a different payment (", out.record.payment_id, ")"));
      out.record = PaymentRecord{};
    }
  }
  find.reset();
  return exists;
}

// The payment and its outbox row, under a savepoint of its own: a failure
// rolls back only this request's rows.
void InsertOne(GroupStatements& s, const NewPayment& item, CreateOutcome& out) {
  Run(s.savepoint);
  try {
    s.insert.bind(1, item.payment_id);
    s.insert.bind(2, item.input.idempotency_key);
    s.insert.bind(3, item.input.payer_account);
    s.insert.bind(4, item.input.payee_account);
    s.insert.bind(5, static_cast<int64_t>(item.input.amount_minor));
    s.insert.bind(6, item.input.currency);
    s.insert.bind(7, item.input.description);
    s.insert.bind(8, static_cast<int64_t>(item.outbox.created_at));
    s.insert.exec();
    s.insert.reset();
    out.record.id = s.db.getLastInsertRowid();
    const int64_t outbox_id = s.outbox.Insert(item.outbox);
    Run(s.release);
    out.record.payment_id = item.payment_id;
    out.record.input = item.input;
    out.record.created_at = item.outbox.created_at;
    out.record.outbox = item.outbox;
    out.record.outbox.id = outbox_id;
  } catch (const SQLite::Exception& e) {
    s.insert.tryReset();
    Run(s.rollback_to);
    Run(s.release);
    out = CreateOutcome{};
    out.status = SqliteError(e, "insert payment");
  }
}

}  // namespace

PaymentStore::PaymentStore(std::unique_ptr<SqliteFile> db) : db_(std::move(db)) {}
PaymentStore::~PaymentStore() = default;  // group_ (its statements) before db_

absl::StatusOr<std::unique_ptr<PaymentStore>> PaymentStore::Open(const std::string& path,
                                                                 const DbOptions& options) {
  ASSIGN_OR_RETURN(auto db, OpenSqliteFile(path, options, &PaymentDbSchema()));
  return std::unique_ptr<PaymentStore>(new PaymentStore(std::move(db)));
}

std::vector<CreateOutcome> PaymentStore::CommitGroup(const std::vector<NewPayment>& batch,
                                                     const std::vector<std::string>& acks,
                                                     int64_t now_ms,
                                                     absl::StatusOr<AckTally>* acked) {
  std::vector<CreateOutcome> outcomes;
  AckTally tally;
  // WithWriter, not Write: the kept statements are reset after the
  // transaction, still under the writer's mutex.
  absl::Status tx_status = db_->WithWriter("commit a group", [&](SQLite::Database& db) {
    absl::Status s = WriteTransaction(db, [&]() -> absl::Status {
      outcomes.assign(batch.size(), CreateOutcome{});  // a retried body starts over
      if (group_ == nullptr) group_ = std::make_unique<GroupStatements>(db);
      GroupStatements& statements = *group_;
      statements.Reset();
      for (size_t i = 0; i < batch.size(); ++i) {
        if (!FoundEarlier(statements.find, batch[i], outcomes[i])) {
          InsertOne(statements, batch[i], outcomes[i]);
        }
      }
      tally = acks.empty() ? AckTally{} : outbox::RecordAcks(statements.acks, db, acks, now_ms);
      Failpoint(kFpPaymentBeforeCommit);
      return absl::OkStatus();
    });
    // No statement may stay mid-step past the transaction: it would hold the
    // writer's read snapshot, which goes stale once another process commits.
    if (group_ != nullptr) group_->Reset();
    return s;
  });
  if (acked != nullptr) {
    *acked = tx_status.ok() ? absl::StatusOr<AckTally>(tally) : tx_status;
  }
  if (!tx_status.ok()) outcomes.assign(batch.size(), CreateOutcome{tx_status, {}, false});
  return outcomes;
}

absl::StatusOr<AckTally> PaymentStore::RecordAcks(const std::vector<std::string>& message_ids,
                                                  int64_t now_ms) {
  absl::StatusOr<AckTally> acked = AckTally{};
  CommitGroup({}, message_ids, now_ms, &acked);
  return acked;
}

absl::Status PaymentStore::RecordPublishFailure(const std::vector<std::string>& message_ids,
                                                const std::string& error, int64_t now_ms) {
  return db_->Write([&](SQLite::Database& writer) {
    outbox::RecordPublishFailure(writer, message_ids, error, now_ms, "payment_service");
    return absl::OkStatus();
  });
}

absl::StatusOr<int> PaymentStore::RecordRejects(const std::vector<Rejection>& rejects,
                                                int64_t now_ms) {
  int changed = 0;
  RETURN_IF_ERROR(db_->Write([&](SQLite::Database& writer) {
    changed = outbox::RecordRejects(writer, rejects, now_ms);
    return absl::OkStatus();
  }));
  return changed;
}

absl::StatusOr<int64_t> PaymentStore::CountSending(int64_t limit) {
  int64_t count = 0;
  RETURN_IF_ERROR(db_->Read("count sending", [&](SQLite::Database& reader) {
    SQLite::Statement stmt(reader,
                           "SELECT count(*) FROM (SELECT 1 FROM outbox WHERE status = 'SENDING' "
                           "LIMIT ?)");
    stmt.bind(1, limit);
    if (stmt.executeStep()) count = stmt.getColumn(0).getInt64();
    return absl::OkStatus();
  }));
  return count;
}

absl::StatusOr<std::vector<std::string>> PaymentStore::TakenOver(
    const std::vector<std::string>& message_ids) {
  std::vector<std::string> taken;
  RETURN_IF_ERROR(db_->Read("read taken over", [&](SQLite::Database& reader) {
    taken = outbox::TakenOver(reader, message_ids);
    return absl::OkStatus();
  }));
  return taken;
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
