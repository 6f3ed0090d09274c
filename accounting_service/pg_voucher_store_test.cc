// Accounting's ledger on PostgreSQL (pg_voucher_store.h), on a server of
// scripts/postgres_node.sh: batches booked as the consumer books them,
// duplicates by message id and by payment, the booking rules, paging,
// pruning, a newer schema refused, and two processes booking copies on one
// database at the same time.
#include "accounting_service/pg_voucher_store.h"

#include <set>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "accounting_service/accounting_store.h"
#include "accounting_service/booking_for_tests.h"
#include "gtest/gtest.h"
#include "shared/postgres/pg_inbox.h"
#include "shared/testing/manual_clock.h"
#include "shared/testing/pg_servers.h"
#include "shared/testing/sequential_ids.h"
#include "shared/testing/status_matchers.h"

namespace outbox::accounting {
namespace {

testing::PgServersEnvironment* const kServer = testing::AddPgServers("accounting_pg_test");

PaymentEvent Event(const std::string& message_id, const std::string& payment_id,
                   int64_t amount = 1000, const std::string& currency = "EUR") {
  PaymentEvent e;
  e.message_id = message_id;
  e.payment_id = payment_id;
  e.payer_account = "payer";
  e.payee_account = "payee";
  e.amount_minor = amount;
  e.currency = currency;
  e.rejects_accepted = true;
  return e;
}

// `events` as one batch through `handler`, as the consumer role drives it.
absl::StatusOr<std::vector<Applied>> Book(ConsumerHandler& handler,
                                          const std::vector<PaymentEvent>& events) {
  handler.Clear();
  for (const PaymentEvent& e : events) RETURN_IF_ERROR(handler.Add(PaymentCreatedDelivery(e)));
  return handler.ApplyBatch();
}

int64_t Count(const std::string& url, const std::string& sql) {
  auto conn = PgConnection::Open(url);
  EXPECT_OK(conn);
  if (!conn.ok()) return -1;
  return testing::PgCount(**conn, sql);
}

class PgVoucherStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    url_ = kServer->FreshSchema();
    auto store = PgVoucherStore::Open(url_, ids_, clock_);
    ASSERT_OK(store);
    store_ = std::move(store).value();
  }

  std::string url_;
  testing::SequentialIds ids_{"v-"};
  testing::ManualClock clock_;
  std::unique_ptr<PgVoucherStore> store_;
};

TEST_F(PgVoucherStoreTest, BooksEachPaymentOnceAndAnswersCopiesWithItsVoucher) {
  PgVoucherHandler handler(*store_, clock_, {});
  auto first = Book(handler, {Event("m1", "p1"), Event("m2", "p2"), Event("m1", "p1")});
  ASSERT_OK(first);
  ASSERT_EQ(first->size(), 3u);
  EXPECT_FALSE((*first)[0].duplicate);
  EXPECT_FALSE((*first)[1].duplicate);
  EXPECT_TRUE((*first)[2].duplicate);  // a copy in the same batch
  EXPECT_EQ((*first)[2].reference, (*first)[0].reference);

  auto again = Book(handler, {Event("m2", "p2")});  // redelivered
  ASSERT_OK(again);
  EXPECT_TRUE((*again)[0].duplicate);
  EXPECT_EQ((*again)[0].reference, (*first)[1].reference);

  auto v = store_->GetByPayment("p1");
  ASSERT_OK(v);
  EXPECT_EQ(v->voucher_id, (*first)[0].reference);
  EXPECT_EQ(v->message_id, "m1");
  EXPECT_EQ(v->amount_minor, 1000);
  EXPECT_EQ(v->currency, "EUR");
  EXPECT_EQ(v->debit_account, "payer");
  EXPECT_EQ(v->credit_account, "payee");
  EXPECT_EQ(v->created_at, clock_.NowMillis());
  EXPECT_EQ(Count(url_, "SELECT count(*) FROM vouchers"), 2);
  EXPECT_EQ(Count(url_, "SELECT count(*) FROM processed_messages"), 2);
  EXPECT_EQ(store_->GetByPayment("p9").status().code(), absl::StatusCode::kNotFound);
}

// A batch costs a few statements, not a few per message: the rows one
// statement writes share its command id (cmin).
TEST_F(PgVoucherStoreTest, BooksABatchInOneStatementPerTable) {
  PgVoucherHandler handler(*store_, clock_, {});
  ASSERT_OK(Book(handler, {Event("m0", "p0")}));
  std::vector<PaymentEvent> events;
  for (int i = 1; i <= 5; ++i) events.push_back(Event(absl::StrCat("m", i), absl::StrCat("p", i)));
  events.push_back(Event("m9", "p0"));  // booked before, under another message id
  events.push_back(Event("m7", "p2"));  // another message of a payment of this batch
  events.push_back(Event("m3", "p3"));  // a copy
  auto r = Book(handler, events);
  ASSERT_OK(r);
  ASSERT_EQ(r->size(), events.size());
  for (int i = 0; i < 5; ++i) {
    EXPECT_FALSE((*r)[i].duplicate) << i;
    auto v = store_->GetByPayment(absl::StrCat("p", i + 1));
    ASSERT_OK(v);
    EXPECT_EQ(v->voucher_id, (*r)[i].reference);
    EXPECT_EQ(v->message_id, absl::StrCat("m", i + 1));
  }
  EXPECT_TRUE((*r)[5].duplicate);
  EXPECT_EQ((*r)[5].reference, store_->GetByPayment("p0")->voucher_id);
  EXPECT_TRUE((*r)[6].duplicate);
  EXPECT_EQ((*r)[6].reference, (*r)[1].reference);
  EXPECT_TRUE((*r)[7].duplicate);
  EXPECT_EQ((*r)[7].reference, (*r)[2].reference);
  // In delivery order.
  EXPECT_EQ(Count(url_,
                  "SELECT count(*) FROM vouchers a JOIN vouchers b ON a.id < b.id "
                  "WHERE a.message_id > b.message_id"),
            0);
  EXPECT_EQ(Count(url_, "SELECT count(*) FROM vouchers"), 6);
  EXPECT_EQ(Count(url_, "SELECT count(DISTINCT cmin::text) FROM vouchers WHERE payment_id <> 'p0'"),
            1);
  EXPECT_EQ(Count(url_, "SELECT count(*) FROM processed_messages"), 8);
  EXPECT_EQ(Count(url_,
                  "SELECT count(DISTINCT cmin::text) FROM processed_messages "
                  "WHERE message_id NOT IN ('m0', 'm9', 'm7')"),
            1);
}

TEST_F(PgVoucherStoreTest, FindsAPaymentBookedUnderAnotherOrAPrunedMessageIdByItsPayment) {
  PgVoucherHandler handler(*store_, clock_, {});
  auto booked = Book(handler, {Event("m1", "p1")});
  ASSERT_OK(booked);
  const std::string voucher = (*booked)[0].reference;

  // The same payment under another message id (a publisher that wrote it twice).
  auto other = Book(handler, {Event("m1-again", "p1")});
  ASSERT_OK(other);
  EXPECT_TRUE((*other)[0].duplicate);
  EXPECT_EQ((*other)[0].reference, voucher);

  // Every id pruned (the consumer prunes through the handler's log): the
  // voucher stays, and a late copy is answered with it.
  clock_.Advance(absl::Hours(1));
  ProcessedLog* log = static_cast<ConsumerHandler&>(handler).processed_log();
  ASSERT_NE(log, nullptr);
  auto pruned = log->PruneProcessed(clock_.NowMillis(), 100);
  ASSERT_OK(pruned);
  EXPECT_EQ(*pruned, 2);
  EXPECT_EQ(Count(url_, "SELECT count(*) FROM processed_messages"), 0);
  auto late = Book(handler, {Event("m1", "p1")});
  ASSERT_OK(late);
  EXPECT_TRUE((*late)[0].duplicate);
  EXPECT_EQ((*late)[0].reference, voucher);
  EXPECT_EQ(Count(url_, "SELECT count(*) FROM vouchers"), 1);
}

TEST_F(PgVoucherStoreTest, AppliesTheBookingRulesToNewPaymentsOnly) {
  BookingRules rules;
  rules.currencies = {"EUR"};
  rules.max_amount_minor = 5000;
  PgVoucherHandler lenient(*store_, clock_, {});
  ASSERT_OK(Book(lenient, {Event("m-usd-old", "p-usd-old", 100, "USD")}));

  PgVoucherHandler handler(*store_, clock_, rules);
  PaymentEvent old_publisher = Event("m-old", "p-old", 100, "USD");
  old_publisher.rejects_accepted = false;
  auto r = Book(handler,
                {Event("m-usd", "p-usd", 100, "USD"), Event("m-big", "p-big", 9000), old_publisher,
                 Event("m-usd-old", "p-usd-old", 100, "USD"), Event("m-ok", "p-ok", 100)});
  ASSERT_OK(r);
  EXPECT_NE((*r)[0].rejected_reason, "");
  EXPECT_NE((*r)[1].rejected_reason, "");
  EXPECT_EQ((*r)[2].rejected_reason, "");
  EXPECT_NE((*r)[2].dead_letter_reason, "");  // a publisher that does not understand rejects
  EXPECT_TRUE((*r)[3].duplicate);             // booked before: answered as booked
  EXPECT_EQ((*r)[3].rejected_reason, "");
  EXPECT_FALSE((*r)[4].duplicate);
  EXPECT_NE((*r)[4].reference, "");
  EXPECT_EQ(Count(url_, "SELECT count(*) FROM vouchers"), 2);
  EXPECT_EQ(Count(url_, "SELECT count(*) FROM processed_messages"), 2);

  // A message that is not a PaymentCreated is refused at Add: dead-lettered.
  Delivery junk = PaymentCreatedDelivery(Event("m-junk", "p-junk"));
  junk.body = "\x08\xff\xff not a protobuf";
  ConsumerHandler& batch = handler;
  batch.Clear();
  EXPECT_FALSE(batch.Add(junk).ok());
}

TEST_F(PgVoucherStoreTest, PagesThroughVouchersInBookingOrder) {
  PgVoucherHandler handler(*store_, clock_, {});
  std::vector<PaymentEvent> events;
  for (int i = 0; i < 7; ++i) events.push_back(Event(absl::StrCat("m", i), absl::StrCat("p", i)));
  ASSERT_OK(Book(handler, events));
  std::vector<std::string> seen;
  int64_t after = 0;
  int pages = 0;
  for (;;) {
    auto page = store_->List(after, 3);
    ASSERT_OK(page);
    ++pages;
    for (const Voucher& v : page->items) seen.push_back(v.payment_id);
    if (page->next_cursor == 0) break;
    after = page->next_cursor;
  }
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(seen, (std::vector<std::string>{"p0", "p1", "p2", "p3", "p4", "p5", "p6"}));
}

TEST_F(PgVoucherStoreTest, RefusesANewerDatabaseUntouched) {
  PgVoucherHandler handler(*store_, clock_, {});
  ASSERT_OK(Book(handler, {Event("m1", "p1")}));
  auto conn = PgConnection::Open(url_);
  ASSERT_OK(conn);
  ASSERT_OK((*conn)->Exec("UPDATE schema_version SET version = 2 WHERE name = 'accounting'"));
  auto newer = PgVoucherStore::Open(url_, ids_, clock_);
  EXPECT_EQ(newer.status().code(), absl::StatusCode::kFailedPrecondition) << newer.status();
  EXPECT_EQ(Count(url_, "SELECT version FROM schema_version WHERE name = 'accounting'"), 2);
  EXPECT_EQ(Count(url_, "SELECT count(*) FROM vouchers"), 1);
  // Through the service's seam too, and an older one is upgraded in place.
  auto seam = OpenAccountingStore(url_, DbOptions{}, ids_, clock_, {});
  EXPECT_EQ(seam.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(PgVoucherStoreTest, TheSeamTakesAUriForPostgresAndAPathForSqlite) {
  auto pg = OpenAccountingStore(url_, DbOptions{}, ids_, clock_, {});
  ASSERT_OK(pg);
  EXPECT_EQ((*pg)->where().find("password"), std::string::npos);
  EXPECT_NE((*pg)->where().find("dbname=outbox"), std::string::npos) << (*pg)->where();
  auto booked = Book((*pg)->handler(), {Event("m1", "p1")});
  ASSERT_OK(booked);
  auto v = (*pg)->reads().GetByPayment("p1");
  ASSERT_OK(v);
  EXPECT_EQ(v->voucher_id, (*booked)[0].reference);

  outbox::TempDir dir("accounting_pg_test_sqlite");
  auto sqlite = OpenAccountingStore(dir.path() + "/accounting.db", DbOptions{}, ids_, clock_, {});
  ASSERT_OK(sqlite);
  EXPECT_EQ((*sqlite)->where(), dir.path() + "/accounting.db");
  EXPECT_EQ((*sqlite)->reads().GetByPayment("p1").status().code(), absl::StatusCode::kNotFound);
}

// Two processes on one database, each with its store and handler, given
// copies of the same messages in opposite orders at the same time: each
// payment booked once, both answers naming its voucher.
TEST_F(PgVoucherStoreTest, TwoProcessesGivenCopiesAtOnceBookEachOnce) {
  auto other = PgVoucherStore::Open(url_, ids_, clock_);
  ASSERT_OK(other);
  PgVoucherHandler a(*store_, clock_, {});
  PgVoucherHandler b(**other, clock_, {});
  constexpr int kRounds = 20;
  for (int round = 0; round < kRounds; ++round) {
    std::vector<PaymentEvent> events;
    for (int i = 0; i < 5; ++i) {
      events.push_back(Event(absl::StrCat("m", round, "-", i), absl::StrCat("p", round, "-", i)));
    }
    std::vector<PaymentEvent> reversed(events.rbegin(), events.rend());
    absl::StatusOr<std::vector<Applied>> ra, rb;
    std::thread ta([&] { ra = Book(a, events); });
    std::thread tb([&] { rb = Book(b, reversed); });
    ta.join();
    tb.join();
    ASSERT_OK(ra);
    ASSERT_OK(rb);
    for (size_t i = 0; i < events.size(); ++i) {
      const Applied& x = (*ra)[i];
      const Applied& y = (*rb)[events.size() - 1 - i];
      EXPECT_EQ(x.reference, y.reference) << events[i].message_id;
      EXPECT_NE(x.duplicate, y.duplicate) << events[i].message_id;  // one booked it
    }
  }
  EXPECT_EQ(Count(url_, "SELECT count(*) FROM vouchers"), kRounds * 5);
}

// Another message id for a payment that another process is booking now:
// it waits for that one's commit and answers with its voucher (the inbox
// cannot see it: the message ids differ).
TEST_F(PgVoucherStoreTest, APaymentBookedMeanwhileUnderAnotherMessageIdIsAnsweredWithItsVoucher) {
  auto holder = PgConnection::Open(url_);
  ASSERT_OK(holder);
  ASSERT_OK((*holder)->Exec("BEGIN"));
  ASSERT_OK((*holder)->Exec(
      "INSERT INTO vouchers (voucher_id, payment_id, message_id, debit_account, credit_account, "
      "amount_minor, currency, created_at) VALUES ('v-first', 'p1', 'm-first', 'a', 'b', 1, "
      "'EUR', 1)"));
  PgVoucherHandler handler(*store_, clock_, {});
  absl::StatusOr<std::vector<Applied>> r;
  std::thread booking([&] { r = Book(handler, {Event("m-second", "p1")}); });
  // Until the booking waits on the uncommitted voucher.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (Count(url_, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'") == 0 &&
         absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_OK((*holder)->Exec("COMMIT"));
  booking.join();
  ASSERT_OK(r);
  EXPECT_EQ((*r)[0].reference, "v-first");
  EXPECT_EQ((*r)[0].dead_letter_reason, "");
  EXPECT_EQ(Count(url_, "SELECT count(*) FROM vouchers"), 1);
}

}  // namespace
}  // namespace outbox::accounting
