// accounting_service itself on PostgreSQL: the binary started with
// ACCOUNTING_DB=postgresql://... (a server of scripts/postgres_node.sh that
// this program starts) against the test broker, two processes on one
// database. Signed PaymentCreated messages published to its queue, each
// twice, are booked once each and every copy is answered with the same
// voucher; a malformed one is dead-lettered; while the database is down the
// batches are held and booked once it is back.
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "accounting_service/booking_for_tests.h"
#include "accounting_service/pg_voucher_store.h"
#include "events/v1/events.pb.h"
#include "gtest/gtest.h"
#include "shared/amqp/amqp_url.h"
#include "shared/amqp/internal/amqp_client.h"
#include "shared/testing/manual_clock.h"
#include "shared/testing/pg_servers.h"
#include "shared/testing/sequential_ids.h"
#include "shared/testing/status_matchers.h"
#include "shared/testing/temp_dir.h"
#include "tests/support/broker.h"
#include "tests/support/process.h"
#include "tests/support/services.h"

namespace outbox::accounting {
namespace {

using testing::Env;
using testing::PollUntil;
using testing::ServiceSet;

testing::PgServersEnvironment* const kServer = testing::AddPgServers("accounting_pg_service_test");

class AccountingOnPostgresTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = kServer->FreshSchema();
    replies_ = testing::UniqueName("ACCPG-REPLIES");
    // A small prefetch: the broker hands the queue out to both processes,
    // not all of it to whichever asked first.
    env_ = {{"ACCOUNTING_DB", db_}, {"REPLY_QUEUES", replies_}, {"AMQP_PREFETCH", "2"}};
    services_.StartPayment();  // it declares the payment queues
    services_.StartAccounting(env_);
    second_ = &services_.StartAccountingShard(0, env_);  // shard 0 of 1: the same queue
    auto url = AmqpUrl::Parse(services_.broker().amqp_url);
    ASSERT_OK(url);
    // payment_service declares the payment queues once it runs: until then a
    // message to PAY_QUEUE is unroutable. (A failed look closes the connection.)
    ASSERT_TRUE(PollUntil(
        [&] {
          auto look = AmqpConnection::Connect(*url, "accounting-pg-test-look");
          return look.ok() && (*look)->MessageCount(services_.pay_queue()).ok();
        },
        absl::Seconds(30)));
    auto conn = AmqpConnection::Connect(*url, "accounting-pg-test");
    ASSERT_OK(conn);
    conn_ = std::move(conn).value();
    ASSERT_OK(conn_->EnableConfirms());
    // Replies on a connection of their own: confirms are read on this one.
    auto replies = AmqpConnection::Connect(*url, "accounting-pg-test-replies");
    ASSERT_OK(replies);
    replies_conn_ = std::move(replies).value();
    ASSERT_OK(replies_conn_->Consume(replies_, 200));
  }

  // PaymentCreated for `payment_id` under `message_id`, signed, answered on replies_.
  OutgoingMessage Payment(const std::string& message_id, const std::string& payment_id) {
    PaymentEvent e;
    e.message_id = message_id;
    e.payment_id = payment_id;
    e.payer_account = "payer";
    e.payee_account = "payee";
    e.amount_minor = 1250;
    e.currency = "EUR";
    return services_.Signed({services_.pay_queue(), message_id, PaymentCreatedDelivery(e).body,
                             replies_, "PaymentCreated"});
  }

  void Publish(const std::vector<OutgoingMessage>& messages) {
    auto confirmed = conn_->PublishConfirmed(messages, absl::Seconds(10));
    ASSERT_OK(confirmed);
    for (size_t i = 0; i < confirmed->size(); ++i) {
      ASSERT_TRUE((*confirmed)[i]) << messages[i].message_id << " not confirmed";
    }
  }

  // Takes replies until `n` have come (or the deadline): each by message id.
  void TakeReplies(size_t n) {
    PollUntil(
        [&] {
          auto got = replies_conn_->NextDeliveries(100, absl::Milliseconds(200));
          EXPECT_OK(got);
          if (!got.ok()) return true;
          for (const Delivery& d : *got) {
            events::v1::PaymentAccounted reply;
            EXPECT_TRUE(reply.ParseFromString(d.body)) << d.type;
            replies_by_message_[reply.message_id()].push_back(reply);
            ++replies_taken_;
            EXPECT_OK(replies_conn_->Ack(d.delivery_tag, false));
          }
          return replies_taken_ >= n;
        },
        absl::Seconds(60), absl::Milliseconds(1));
  }

  int64_t DeadLettered() {
    auto n = conn_->MessageCount(DeadLetterQueueOf(services_.pay_queue()));
    EXPECT_OK(n);
    return n.ok() ? *n : -1;
  }

  std::string db_;
  std::string replies_;
  Env env_;
  ServiceSet services_;
  ServiceSet::AccountingShard* second_ = nullptr;
  std::unique_ptr<AmqpConnection> conn_;
  std::unique_ptr<AmqpConnection> replies_conn_;
  std::map<std::string, std::vector<events::v1::PaymentAccounted>> replies_by_message_;
  size_t replies_taken_ = 0;
};

TEST_F(AccountingOnPostgresTest, TwoProcessesOnOneDatabaseBookEachPaymentOnce) {
  // Where they book, in their start line: the database, never a password.
  for (const std::string& log : {services_.accounting().Log(), second_->process.Log()}) {
    EXPECT_NE(log.find("dbname=outbox"), std::string::npos) << log;
    EXPECT_EQ(log.find("password="), std::string::npos);
  }

  constexpr int kPayments = 40;
  std::vector<OutgoingMessage> messages;
  for (int i = 0; i < kPayments; ++i) {
    const OutgoingMessage m = Payment(absl::StrCat("accpg-m", i), absl::StrCat("accpg-p", i));
    messages.push_back(m);  // and a copy at once: the two processes take one each
    messages.push_back(m);
  }
  // Payment 0 once more under a message id of its own.
  messages.push_back(Payment("accpg-m0-again", "accpg-p0"));
  // Not a PaymentCreated: dead-lettered, never answered.
  messages.push_back(services_.Signed(
      {services_.pay_queue(), "accpg-junk", "\x08\xff\xff junk", replies_, "PaymentCreated"}));
  Publish(messages);
  TakeReplies(2 * kPayments + 1);
  ASSERT_EQ(replies_taken_, static_cast<size_t>(2 * kPayments + 1));

  std::set<std::string> vouchers;
  int duplicates = 0;
  for (int i = 0; i < kPayments; ++i) {
    const auto& answers = replies_by_message_[absl::StrCat("accpg-m", i)];
    ASSERT_EQ(answers.size(), 2u) << i;
    EXPECT_NE(answers[0].voucher_id(), "");
    EXPECT_EQ(answers[0].voucher_id(), answers[1].voucher_id()) << i;
    EXPECT_EQ(answers[0].duplicate() + answers[1].duplicate(), 1) << i;  // one booked it
    duplicates += answers[0].duplicate() + answers[1].duplicate();
    vouchers.insert(answers[0].voucher_id());
  }
  const auto& again = replies_by_message_["accpg-m0-again"];
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].voucher_id(), replies_by_message_["accpg-m0"][0].voucher_id());
  EXPECT_EQ(vouchers.size(), static_cast<size_t>(kPayments));
  EXPECT_TRUE(PollUntil([&] { return DeadLettered() == 1; }, absl::Seconds(30)));

  // Either process serves every voucher: the same ledger, paged.
  EXPECT_EQ(services_.ShardVouchers(0).size(), static_cast<size_t>(kPayments));
  EXPECT_EQ(services_.AllVouchers().size(), static_cast<size_t>(kPayments));
  // How the broker shared the copies out (a figure, not a check).
  EXPECT_EQ(services_.accounting().Terminate(), 0);
  EXPECT_EQ(second_->process.Terminate(), 0);
  std::cout << "duplicates answered: " << duplicates << "\n";
  for (const std::string& log : {services_.accounting().Log(), second_->process.Log()}) {
    const size_t at = log.find("accounting_service_stopped");
    if (at != std::string::npos) std::cout << log.substr(at, log.find('\n', at) - at) << "\n";
  }
}

TEST_F(AccountingOnPostgresTest, HoldsBatchesWhileTheDatabaseIsDownAndBooksThemOnceAfter) {
  constexpr int kPayments = 10;
  testing::PgNode("stop " + kServer->servers().primary());
  std::vector<OutgoingMessage> messages;
  for (int i = 0; i < kPayments; ++i) {
    const OutgoingMessage m = Payment(absl::StrCat("accpg-down-m", i), absl::StrCat("down-p", i));
    messages.push_back(m);
    messages.push_back(m);
  }
  Publish(messages);
  // Held by whichever process took them, not dead-lettered.
  EXPECT_TRUE(PollUntil(
      [&] {
        return services_.accounting().Log().find("batch_held") != std::string::npos ||
               second_->process.Log().find("batch_held") != std::string::npos;
      },
      absl::Seconds(60)));
  EXPECT_EQ(replies_taken_, 0u);
  testing::PgNode("start " + kServer->servers().primary());

  TakeReplies(2 * kPayments);
  ASSERT_EQ(replies_taken_, static_cast<size_t>(2 * kPayments));
  for (int i = 0; i < kPayments; ++i) {
    const auto& answers = replies_by_message_[absl::StrCat("accpg-down-m", i)];
    ASSERT_EQ(answers.size(), 2u) << i;
    EXPECT_EQ(answers[0].voucher_id(), answers[1].voucher_id()) << i;
  }
  EXPECT_EQ(DeadLettered(), 0);
  EXPECT_EQ(services_.AllVouchers().size(), static_cast<size_t>(kPayments));
  for (const std::string& log : {services_.accounting().Log(), second_->process.Log()}) {
    EXPECT_EQ(log.find("password="), std::string::npos);
  }
}

// Start-up refusals: a clear line and a non-zero exit, never the password
// of a connection string that holds one (nor in --help).
TEST(AccountingOnPostgresStartTest, RefusesADatabaseItCannotUseWithAClearLineAndNoPassword) {
  const std::string secret = "hunter2-not-for-logs";
  std::string with_password = kServer->url();
  with_password.replace(with_password.find("outbox@"), 7, "outbox:" + secret + "@");
  const std::string newer = kServer->FreshSchema();
  {
    testing::SequentialIds ids;
    testing::ManualClock clock;
    ASSERT_OK(PgVoucherStore::Open(newer, ids, clock));
    auto conn = PgConnection::Open(newer);
    ASSERT_OK(conn);
    ASSERT_OK((*conn)->Exec("UPDATE schema_version SET version = 99 WHERE name = 'accounting'"));
  }
  const struct {
    std::string db;
    std::string line;
  } cases[] = {
      {"postgresql://outbox:" + secret + "@127.0.0.1:1/outbox", "cannot connect to PostgreSQL"},
      {with_password, "refused the credentials"},
      {newer, "refusing to open a newer database"},
  };
  outbox::TempDir dir("accounting_pg_start");
  for (const auto& c : cases) {
    const testing::CommandResult r =
        testing::RunToCompletion(testing::BinaryPath("accounting_service"), {},
                                 {{"ACCOUNTING_DB", c.db},
                                  {"AMQP_URL", "amqp://127.0.0.1:1"},
                                  {"ALLOW_UNSIGNED_MESSAGES", "true"},
                                  {"ACCOUNTING_LISTEN", "127.0.0.1:0"}},
                                 dir.path() + "/run");
    const std::string output = r.out + r.err;
    EXPECT_NE(r.exit_code, 0) << output;
    EXPECT_NE(output.find("accounting_service_failed"), std::string::npos) << output;
    EXPECT_NE(output.find(c.line), std::string::npos) << output;
    EXPECT_EQ(output.find(secret), std::string::npos) << output;
  }
  for (const std::string& db :
       {with_password, "postgresql://outbox@127.0.0.1:1/outbox?password=" + secret}) {
    const testing::CommandResult help =
        testing::RunToCompletion(testing::BinaryPath("accounting_service"), {"--help"},
                                 {{"ACCOUNTING_DB", db}}, dir.path() + "/help");
    EXPECT_NE(help.out.find("--accounting_db"), std::string::npos);
    EXPECT_EQ((help.out + help.err).find(secret), std::string::npos);
  }
}

}  // namespace
}  // namespace outbox::accounting
