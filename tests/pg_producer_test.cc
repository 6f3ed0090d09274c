// PgProducer on a PostgreSQL server of scripts/postgres_node.sh with the
// test run's RabbitMQ node: many threads writing payments through the group
// commit, a consumer booking them on its own SQLite file, every outbox row
// closed SENT by the replies; and rows whose publishes were lost, closed by
// the recovery a PgProducer runs in its process on the same database.
#include "shared/postgres/pg_producer.h"

#include <stdio.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/amqp/amqp_url.h"
#include "shared/postgres/pg_schema.h"
#include "shared/roles/config.h"
#include "shared/roles/consumer.h"
#include "shared/sqlite/inbox.h"
#include "shared/sqlite/sqlite_file.h"
#include "shared/sqlite/sqlite_message_handler.h"
#include "shared/testing/fakes.h"
#include "shared/testing/pg_servers.h"
#include "shared/testing/status_matchers.h"
#include "shared/testing/temp_dir.h"
#include "tests/support/broker.h"

namespace outbox::testing {
namespace {

using ::testing::HasSubstr;

constexpr int kThreads = 8;
constexpr int kPerThread = 25;
constexpr int kMessages = kThreads * kPerThread;

PgServersEnvironment* const kServer = AddPgServers("pg_producer_test");

inline const DbSchema& BookingSchema() {
  static const DbSchema schema =
      ConsumerSchema("CREATE TABLE booked (payment_id TEXT PRIMARY KEY, message_id TEXT)");
  return schema;
}

class PgProducerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> next{0};
    const std::string name = absl::StrCat("p", next++);
    queue_ = UniqueName("pg.payments");
    conninfo_ = FreshPgSchema(kServer->url(), name);
    ASSERT_FALSE(conninfo_.empty());
    auto test = PgConnection::Open(conninfo_);
    ASSERT_OK(test);
    test_ = std::move(test).value();
    ASSERT_OK(CreatePgOutboxTables(*test_));
    ASSERT_OK(test_->Exec("CREATE TABLE payments (id TEXT PRIMARY KEY)"));
    auto amqp = AmqpUrl::Parse(TestBroker().amqp_url);
    ASSERT_OK(amqp);
    amqp_ = *amqp;
    auto file = OpenSqliteFile(dir_.path() + "/booking.db", {}, &BookingSchema());
    ASSERT_OK(file);
    file_ = std::move(file).value();
  }

  PgProducer::Options ProducerOptions() {
    PgProducer::Options options;
    options.amqp = amqp_;
    options.queue = queue_;
    options.signing = Signing::Unsigned();
    options.retry.base_delay = absl::Seconds(1);
    return options;
  }

  // A consumer booking each payment once, on its own SQLite file.
  std::unique_ptr<Consumer> StartConsumer() {
    handler_ = std::make_unique<SqliteApply>(
        *file_, "payment", [](SQLite::Database& tx, const Delivery& payment) {
          SQLite::Statement insert(tx, "INSERT INTO booked VALUES (?1, ?2)");
          insert.bind(1, payment.body);
          insert.bind(2, payment.message_id);
          insert.exec();
          return absl::StatusOr<std::string>("booked-" + payment.body);
        });
    Consumer::Options options;
    options.amqp = amqp_;
    options.queue = queue_;
    options.signing = Signing::Unsigned();
    auto consumer = Consumer::Start(*handler_, options);
    EXPECT_OK(consumer);
    return consumer.ok() ? std::move(consumer).value() : nullptr;
  }

  // Writes kMessages payments from kThreads threads, each with its row in
  // payments; every write succeeds.
  void WritePayments(PgProducer& producer) {
    std::atomic<int> failed{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kPerThread; ++i) {
          const std::string id = absl::StrCat("pay-", t, "-", i);
          auto written =
              producer.Write(MessageSpec::Of("payment", id, id), [id](PgConnection& conn) {
                return conn.Query("INSERT INTO payments (id) VALUES ($1)", {id}).status();
              });
          if (!written.ok()) {
            ++failed;
            ADD_FAILURE() << id << ": " << written.status();
          }
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    EXPECT_EQ(failed.load(), 0);
  }

  int64_t Count(const std::string& sql) { return PgCount(*test_, sql); }
  int64_t Sent() { return Count("SELECT count(*) FROM outbox WHERE status = 'SENT'"); }
  int64_t Booked() {
    int64_t n = -1;
    EXPECT_OK(file_->Read("count booked", [&](SQLite::Database& db) {
      SQLite::Statement q(db, "SELECT count(*) FROM booked");
      q.executeStep();
      n = q.getColumn(0).getInt64();
      return absl::OkStatus();
    }));
    return n;
  }

  // Polls `done` until it holds or `timeout` passes.
  static bool Eventually(const std::function<bool()>& done, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (!done()) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return true;
  }

  TempDir dir_{"pg_producer_test_files"};
  std::string queue_;
  std::string conninfo_;
  AmqpUrl amqp_;
  std::unique_ptr<PgConnection> test_;
  std::unique_ptr<SqliteFile> file_;
  std::unique_ptr<SqliteApply> handler_;
};

// The options are checked before anything connects: SQLite's on_closed is
// refused for pg_on_closed, and Producer's own checks apply.
TEST_F(PgProducerTest, OptionsAreChecked) {
  PgProducer::Options options = ProducerOptions();
  options.on_closed = [](SQLite::Database&, const OutboxMessage&) { return absl::OkStatus(); };
  EXPECT_THAT(PgProducer::Start(conninfo_, options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pg_on_closed")));
  options = ProducerOptions();
  options.queue.clear();
  EXPECT_THAT(PgProducer::Start(conninfo_, options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("PgProducer: options.queue")));
  options = ProducerOptions();
  options.signing = Signing();
  EXPECT_THAT(PgProducer::Start(conninfo_, options).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  options = ProducerOptions();
  options.pg_group_commit.max_batch = 0;
  EXPECT_THAT(PgProducer::Start(conninfo_, options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pg_group_commit")));
}

// Payments from many threads share group commits, the consumer books each
// once, and its replies close every row SENT.
TEST_F(PgProducerTest, WritesFromManyThreadsAreBookedAndClosed) {
  std::unique_ptr<Consumer> consumer = StartConsumer();
  ASSERT_NE(consumer, nullptr);
  PgProducer::Options options = ProducerOptions();
  options.recovery_in_process = false;
  auto producer = PgProducer::Start(conninfo_, options);
  ASSERT_OK(producer);

  WritePayments(**producer);

  auto closed = (*producer)->WaitUntilClosed(absl::Now() + absl::Minutes(2));
  ASSERT_OK(closed);
  EXPECT_EQ(closed->sending, 0);
  EXPECT_EQ(closed->sent, kMessages);
  EXPECT_EQ(Sent(), kMessages);
  EXPECT_TRUE(Eventually([&] { return Booked() == kMessages; }, absl::Minutes(1)));
  EXPECT_EQ(Count("SELECT count(*) FROM outbox"), kMessages);
  EXPECT_EQ(Count("SELECT count(*) FROM payments"), kMessages);
  EXPECT_EQ(Booked(), kMessages);
  EXPECT_EQ((*producer)->written(), kMessages);
  EXPECT_LT((*producer)->group_commits(), kMessages);
  EXPECT_EQ((*producer)->acknowledged(), kMessages);
  EXPECT_EQ((*producer)->recovery(), nullptr);
  printf("%d payments in %lld group commits\n", kMessages,
         static_cast<long long>((*producer)->group_commits()));
  (*producer)->Stop();
  consumer->Stop();
}

// PgProducer is Producer on another store: the same defaults, and the same
// counts and waits for a producer that exits, on rows its relay never
// published (no broker: the links are fakes, the relay is not started).
TEST_F(PgProducerTest, CountsAndWaitsAsProducerDoes) {
  EXPECT_EQ(PgProducer::Options().recovery_in_process, Config().recovery_in_process);
  EXPECT_EQ(PgProducer::Options().name, Producer::Options().name);
  auto session = PgSession::Open(conninfo_);
  ASSERT_OK(session);
  auto producer =
      PgProducer::Create(**session, **session, ProducerOptions(), std::make_unique<FakePublisher>(),
                         std::make_unique<FakeConsumer>());
  ASSERT_OK(producer);
  EXPECT_EQ((*producer)->recovery(), nullptr);  // Create never runs it
  for (const std::string id : {"o-1", "o-2"}) {
    ASSERT_OK((*producer)->Write(MessageSpec::Of("payment", id, id), [id](PgConnection& conn) {
      return conn.Query("INSERT INTO payments (id) VALUES ($1)", {id}).status();
    }));
  }
  auto counts = (*producer)->CountRows();
  ASSERT_OK(counts);
  EXPECT_EQ(counts->sending, 2);
  EXPECT_EQ(counts->sent, 0);
  EXPECT_EQ(counts->failed, 0);
  EXPECT_THAT(
      (*producer)->WaitUntilClosed(absl::Now()).status(),
      StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("2 outbox rows still SENDING")));
  EXPECT_THAT((*producer)->WaitUntilClosed(absl::InfiniteFuture(), [] { return true; }).status(),
              StatusIs(absl::StatusCode::kCancelled));
  (*producer)->Stop();
}

// The process's one options block chooses PostgreSQL by its connection
// string: the library's schema and the adopter's are made on a database
// that has neither, recovery runs in the process, and what is written is
// booked and closed. A SQLite path, or SQLite's closing step, is refused.
TEST_F(PgProducerTest, StartsFromTheProcesssConfig) {
  static const PgSchema* const shop =
      new PgSchema{"shop", {{"orders", [](PgConnection& conn) {
                               return conn.Exec("CREATE TABLE orders (id TEXT PRIMARY KEY)");
                             }}}};
  Config config;
  config.amqp = amqp_;
  config.queue = queue_;
  config.signing = Signing::Unsigned();
  config.retry.base_delay = absl::Seconds(1);
  config.db = dir_.path() + "/shop.db";
  EXPECT_THAT(PgProducer::Start(config, shop).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Producer::Start")));
  config.db = FreshPgSchema(kServer->url(), "from_config");
  ASSERT_FALSE(config.db.empty());
  config.on_closed = [](SQLite::Database&, const OutboxMessage&) { return absl::OkStatus(); };
  EXPECT_THAT(PgProducer::Start(config, shop).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("config.on_closed")));
  config.on_closed = nullptr;

  std::unique_ptr<Consumer> consumer = StartConsumer();
  ASSERT_NE(consumer, nullptr);
  auto producer = PgProducer::Start(config, shop);
  ASSERT_OK(producer);
  EXPECT_NE((*producer)->recovery(), nullptr);
  constexpr int kOrders = 20;
  for (int i = 0; i < kOrders; ++i) {
    const std::string id = absl::StrCat("order-", i);
    ASSERT_OK((*producer)->Write(MessageSpec::Of("payment", id, id), [id](PgConnection& conn) {
      return conn.Query("INSERT INTO orders (id) VALUES ($1)", {id}).status();
    }));
  }
  EXPECT_OK((*producer)->WaitUntilClosed(absl::Now() + absl::Minutes(1)));
  EXPECT_TRUE(Eventually([&] { return Booked() == kOrders; }, absl::Minutes(1)));
  auto shop_db = PgConnection::Open(config.db);
  ASSERT_OK(shop_db);
  EXPECT_EQ(PgCount(**shop_db, "SELECT count(*) FROM orders"), kOrders);
  EXPECT_EQ(PgCount(**shop_db, "SELECT count(*) FROM outbox WHERE status = 'SENT'"), kOrders);
  (*producer)->Stop();
  consumer->Stop();
}

// The relay's publishes are refused (a broker that nacks each one): every
// row stays SENDING. A PgProducer running recovery in its process on the
// same database re-publishes them through the real broker, the consumer
// books each once, and the replies close them SENT.
TEST_F(PgProducerTest, RecoveryInProcessRepublishesWhatTheRelayLost) {
  {
    auto session = PgSession::Open(conninfo_);
    ASSERT_OK(session);
    auto publisher = std::make_unique<FakePublisher>();
    publisher->answer = [](const OutgoingMessage&) { return FakePublisher::Answer::kNack; };
    auto lost = PgProducer::Create(**session, **session, ProducerOptions(), std::move(publisher),
                                   std::make_unique<FakeConsumer>());
    ASSERT_OK(lost);
    (*lost)->StartWorkers();
    WritePayments(**lost);
    EXPECT_TRUE(
        Eventually([&] { return (*lost)->publish_failed() >= kMessages; }, absl::Minutes(1)))
        << (*lost)->publish_failed();
    (*lost)->Stop();
  }
  EXPECT_EQ(Count("SELECT count(*) FROM outbox WHERE status = 'SENDING'"), kMessages);
  EXPECT_EQ(Count("SELECT count(*) FROM payments"), kMessages);

  std::unique_ptr<Consumer> consumer = StartConsumer();
  ASSERT_NE(consumer, nullptr);
  PgProducer::Options options = ProducerOptions();
  options.recovery_in_process = true;
  options.recovery.recovery.idle_sleep = absl::Milliseconds(200);
  auto producer = PgProducer::Start(conninfo_, options);
  ASSERT_OK(producer);
  ASSERT_NE((*producer)->recovery(), nullptr);

  EXPECT_OK((*producer)->WaitUntilClosed(absl::Now() + absl::Minutes(2)));
  EXPECT_EQ(Sent(), kMessages);
  EXPECT_TRUE(Eventually([&] { return Booked() == kMessages; }, absl::Minutes(1)));
  EXPECT_EQ(Count("SELECT count(*) FROM outbox"), kMessages);
  EXPECT_EQ(Booked(), kMessages);
  EXPECT_GE((*producer)->recovery()->republished(), kMessages);
  EXPECT_EQ((*producer)->written(), 0);
  (*producer)->Stop();
  consumer->Stop();
}

}  // namespace
}  // namespace outbox::testing
