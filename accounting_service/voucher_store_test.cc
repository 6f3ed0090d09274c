#include "accounting_service/voucher_store.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "accounting_service/booking_for_tests.h"
#include "shared/testing/manual_clock.h"
#include "shared/testing/sequential_ids.h"
#include "shared/testing/status_matchers.h"

namespace outbox::accounting {
namespace {

class VoucherStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/voucher_store_test.XXXXXX";
    dir_ = mkdtemp(tmpl);
    auto s = VoucherStore::Open(dir_ + "/accounting.db", DbOptions{}, ids_, clock_);
    ASSERT_OK(s);
    store_ = std::move(s).value();
  }
  void TearDown() override {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  static PaymentEvent Event(const std::string& message_id, const std::string& payment_id) {
    return {message_id, payment_id, "alice", "bob", 700, "JPY"};
  }

  std::string dir_;
  testing::SequentialIds ids_{"v-"};
  testing::ManualClock clock_;
  std::unique_ptr<VoucherStore> store_;
};

// Booked through the consumer's handler: by message id, then by payment.
TEST_F(VoucherStoreTest, AppliesOnceAndReportsDuplicates) {
  auto first =
      BookEvents(*store_, clock_, {Event("m1", "p1"), Event("m2", "p2"), Event("m1", "p1")});
  ASSERT_OK(first);
  EXPECT_FALSE((*first)[0].duplicate);
  EXPECT_FALSE((*first)[1].duplicate);
  EXPECT_TRUE((*first)[2].duplicate);  // same message twice in one batch
  EXPECT_EQ((*first)[2].reference, (*first)[0].reference);

  auto again = BookEvents(*store_, clock_, {Event("m1", "p1"), Event("m9", "p2")});
  ASSERT_OK(again);
  EXPECT_TRUE((*again)[0].duplicate);
  EXPECT_TRUE((*again)[1].duplicate);  // another message for a booked payment
  EXPECT_EQ((*again)[1].reference, (*first)[1].reference);

  auto page = store_->List(0, 100);
  ASSERT_OK(page);
  ASSERT_EQ(page->items.size(), 2u);
  EXPECT_EQ(page->items[0].debit_account, "alice");
  EXPECT_EQ(page->items[0].credit_account, "bob");
  EXPECT_EQ(page->items[0].amount_minor, 700);
  auto v = store_->GetByPayment("p2");
  ASSERT_OK(v);
  EXPECT_EQ(v->message_id, "m2");
  EXPECT_TRUE(absl::IsNotFound(store_->GetByPayment("nope").status()));
}

TEST_F(VoucherStoreTest, DedupSurvivesReopening) {
  ASSERT_OK(BookEvents(*store_, clock_, {Event("m1", "p1")}));
  store_.reset();
  store_ =
      std::move(VoucherStore::Open(dir_ + "/accounting.db", DbOptions{}, ids_, clock_)).value();
  auto again = BookEvents(*store_, clock_, {Event("m1", "p1")});
  ASSERT_OK(again);
  EXPECT_TRUE((*again)[0].duplicate);
}

TEST_F(VoucherStoreTest, PruningTakesOnlyIdsOlderThanTheCutoffOldestFirstAtMostTheLimit) {
  ASSERT_OK(BookEvents(*store_, clock_, {Event("m1", "p1"), Event("m2", "p2"), Event("m3", "p3")}));
  clock_.Advance(absl::Minutes(1));
  ASSERT_OK(BookEvents(*store_, clock_, {Event("m4", "p4"), Event("m5", "p5")}));
  const int64_t cutoff = clock_.NowMillis();  // m4 and m5 are not older
  clock_.Advance(absl::Minutes(1));
  ASSERT_OK(BookEvents(*store_, clock_, {Event("m6", "p6")}));
  auto first = store_->PruneProcessed(cutoff, 2);
  ASSERT_OK(first);
  EXPECT_EQ(*first, 2);
  auto second = store_->PruneProcessed(cutoff, 2);
  ASSERT_OK(second);
  EXPECT_EQ(*second, 1);
  auto none = store_->PruneProcessed(cutoff, 2);
  ASSERT_OK(none);
  EXPECT_EQ(*none, 0);
  SQLite::Database db(dir_ + "/accounting.db", SQLite::OPEN_READONLY);
  std::vector<std::string> left;
  SQLite::Statement ids(db, "SELECT message_id FROM processed_messages ORDER BY message_id");
  while (ids.executeStep()) left.push_back(ids.getColumn(0).getString());
  EXPECT_EQ(left, (std::vector<std::string>{"m4", "m5", "m6"}));
  EXPECT_EQ(db.execAndGet("SELECT count(*) FROM vouchers").getInt64(), 6);  // vouchers stay
}

// The dedup by payment backs the dedup by message id: a redelivery after its
// id was pruned books nothing and reports the voucher booked the first time.
TEST_F(VoucherStoreTest, AMessageWhoseIdWasPrunedIsStillADuplicate) {
  auto first = BookEvents(*store_, clock_, {Event("m1", "p1")});
  ASSERT_OK(first);
  clock_.Advance(absl::Hours(1));
  auto pruned = store_->PruneProcessed(clock_.NowMillis(), 10);
  ASSERT_OK(pruned);
  ASSERT_EQ(*pruned, 1);
  auto again = BookEvents(*store_, clock_, {Event("m1", "p1")});
  ASSERT_OK(again);
  EXPECT_TRUE((*again)[0].duplicate);
  EXPECT_EQ((*again)[0].reference, (*first)[0].reference);
  auto page = store_->List(0, 10);
  ASSERT_OK(page);
  EXPECT_EQ(page->items.size(), 1u);
}

// Vouchers are booked only in the consumer's transaction, on the writer.
TEST_F(VoucherStoreTest, BookRefusesAConnectionOtherThanTheWriter) {
  SQLite::Database other(dir_ + "/accounting.db", SQLite::OPEN_READWRITE);
  EXPECT_THAT(store_->Book(other, Event("m1", "p1")).status(),
              testing::StatusIs(absl::StatusCode::kInternal));
  auto page = store_->List(0, 10);
  ASSERT_OK(page);
  EXPECT_TRUE(page->items.empty());
}

}  // namespace
}  // namespace outbox::accounting
