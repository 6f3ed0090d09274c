// The failover under load, with PgProducer and the test run's RabbitMQ
// node: a primary of scripts/postgres_node.sh with its synchronous standby
// (remote_apply), 8 threads writing payments (a business row and its outbox
// row) through one PgProducer on the multi-host connection string
// (target_session_attrs=read-write), a consumer booking each payment on its
// own SQLite file. Under that load the primary is SIGKILLed and the standby
// promoted; the producer reconnects by itself. Every write acknowledged OK is
// on the promoted server and booked exactly once, every outbox row ends
// SENT, no business row is there without its outbox row or the other way.
//
// A write that failed is UNAVAILABLE. A group whose COMMIT was cut off by
// the kill may have committed all the same (PgSession: "a COMMIT cut off
// may have committed or not"; the standby applied it before the primary
// died): such a write is "uncertain", its rows may be there although its
// writer heard UNAVAILABLE. It never reached the relay, so the recovery
// the producer runs in its process re-publishes it; it too must end SENT
// and be booked once.
//
// Printed, not asserted (the machine decides them): writes OK and failed,
// the window in which writes failed (first failure to the first success
// after it), the time from the kill until no row is SENDING, the rows
// recovery re-published.
#include <stdio.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "shared/amqp/amqp_url.h"
#include "shared/base/internal/mutex.h"
#include "shared/postgres/pg_producer.h"
#include "shared/postgres/pg_schema.h"
#include "shared/roles/consumer.h"
#include "shared/sqlite/inbox.h"
#include "shared/sqlite/sqlite_file.h"
#include "shared/sqlite/sqlite_message_handler.h"
#include "shared/testing/pg_servers.h"
#include "shared/testing/status_matchers.h"
#include "tests/support/broker.h"

namespace outbox::testing {
namespace {

constexpr int kWriters = 8;

inline const DbSchema& BookingSchema() {
  // No key on payment_id: a payment booked twice shows as two rows.
  static const DbSchema schema =
      ConsumerSchema("CREATE TABLE booked (payment_id TEXT NOT NULL, message_id TEXT NOT NULL)");
  return schema;
}

// What the writers heard.
struct Outcomes {
  Mutex mu;
  std::set<std::string> ok;                    // payment ids acknowledged OK
  std::map<std::string, absl::Status> failed;  // payment id: its error
  std::vector<absl::Time> failed_at;
  std::vector<absl::Time> ok_at;
};

class PgFailoverLoadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    servers_ = std::make_unique<PgServers>("pg_failover_load_test", PgServers::kWithStandby);
    ASSERT_TRUE(servers_->ok());
    // Both hosts, the read-write one wins; the password comes from the
    // node's pgpass (passfile), never from the string.
    conninfo_ = servers_->FailoverUrl();
    ASSERT_NE(conninfo_.find("target_session_attrs=read-write"), std::string::npos);
    auto setup = PgConnection::Open(conninfo_);
    ASSERT_OK(setup);
    ASSERT_OK(CreatePgOutboxTables(**setup));
    ASSERT_OK((*setup)->Exec("CREATE TABLE payments (id TEXT PRIMARY KEY, amount BIGINT)"));
    auto amqp = AmqpUrl::Parse(TestBroker().amqp_url);
    ASSERT_OK(amqp);
    amqp_ = *amqp;
    queue_ = UniqueName("pg.failover");
    auto file = OpenSqliteFile(servers_->dir() + "/booking.db", {}, &BookingSchema());
    ASSERT_OK(file);
    file_ = std::move(file).value();
  }

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

  // One value of `sql` on the server that takes writes; -1 when it cannot
  // be read now (the failover under way).
  int64_t Count(const std::string& sql) {
    auto conn = PgConnection::Open(conninfo_);
    if (!conn.ok()) return -1;
    auto r = (*conn)->Query(sql);
    int64_t n = -1;
    if (!r.ok() || r->rows() != 1 || !absl::SimpleAtoi(r->Get(0, 0), &n)) return -1;
    return n;
  }
  // The payment ids of `sql`'s first column.
  std::set<std::string> Ids(const std::string& sql) {
    std::set<std::string> ids;
    auto conn = PgConnection::Open(conninfo_);
    EXPECT_OK(conn);
    if (!conn.ok()) return ids;
    auto r = (*conn)->Query(sql);
    EXPECT_OK(r);
    if (!r.ok()) return ids;
    for (int i = 0; i < r->rows(); ++i) ids.emplace(r->Get(i, 0));
    return ids;
  }
  // payment id: how many times it is booked.
  std::map<std::string, int> Booked() {
    std::map<std::string, int> booked;
    EXPECT_OK(file_->Read("booked", [&](SQLite::Database& db) {
      SQLite::Statement q(db, "SELECT payment_id, count(*) FROM booked GROUP BY payment_id");
      while (q.executeStep()) booked[q.getColumn(0).getString()] = q.getColumn(1).getInt();
      return absl::OkStatus();
    }));
    return booked;
  }

  // Polls `done` every 50 ms until it holds or `timeout` passes.
  static bool Eventually(const std::function<bool()>& done, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (!done()) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return true;
  }

  std::unique_ptr<PgServers> servers_;
  std::string conninfo_;
  std::string queue_;
  AmqpUrl amqp_;
  std::unique_ptr<SqliteFile> file_;
  std::unique_ptr<SqliteApply> handler_;
};

TEST_F(PgFailoverLoadTest, PrimaryKilledUnderLoadStandbyPromotedNothingLostOrDuplicated) {
  std::unique_ptr<Consumer> consumer = StartConsumer();
  ASSERT_NE(consumer, nullptr);
  PgProducer::Options options;
  options.amqp = amqp_;
  options.queue = queue_;
  options.signing = Signing::Unsigned();
  // The library's retry policy (first retry after 5 s): recovery re-publishes
  // a row once its acknowledgement is that late, not because the machine is
  // slow for a second.
  options.recovery_in_process = true;
  options.recovery.recovery.idle_sleep = absl::Milliseconds(200);
  auto started = PgProducer::Start(conninfo_, options);
  ASSERT_OK(started);
  PgProducer& producer = **started;

  Outcomes outcomes;
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (int t = 0; t < kWriters; ++t) {
    writers.emplace_back([&, t] {
      for (int i = 0; !stop.load(); ++i) {
        const std::string id = absl::StrCat("pay-", t, "-", i);
        auto written =
            producer.Write(MessageSpec::Of("payment", id, id), [id, i](PgConnection& conn) {
              return conn
                  .Query("INSERT INTO payments (id, amount) VALUES ($1, $2)",
                         {id, std::to_string(100 + i)})
                  .status();
            });
        const absl::Time now = absl::Now();
        MutexLock lock(&outcomes.mu);
        if (written.ok()) {
          outcomes.ok.insert(id);
          outcomes.ok_at.push_back(now);
        } else {
          outcomes.failed.emplace(id, written.status());
          outcomes.failed_at.push_back(now);
        }
      }
    });
  }
  auto ok_count = [&] {
    MutexLock lock(&outcomes.mu);
    return outcomes.ok.size();
  };

  // About 2 s of load, with writes going through.
  const absl::Time load_start = absl::Now();
  EXPECT_TRUE(
      Eventually([&] { return absl::Now() - load_start >= absl::Seconds(2) && ok_count() >= 100; },
                 absl::Minutes(1)));
  const size_t ok_before_kill = ok_count();

  const absl::Time killed_at = absl::Now();
  EXPECT_TRUE(PgServers::Kill(servers_->primary()));
  EXPECT_TRUE(PgServers::Promote(servers_->standby()));
  const absl::Time promoted_at = absl::Now();

  // About 3 s more, and writes succeed again on the promoted server: the
  // producer reconnected by itself.
  EXPECT_TRUE(Eventually(
      [&] {
        return absl::Now() - promoted_at >= absl::Seconds(3) && ok_count() >= ok_before_kill + 100;
      },
      absl::Minutes(2)))
      << "writes do not succeed after the promotion: " << ok_count() - ok_before_kill
      << " since the kill";
  stop = true;
  for (std::thread& writer : writers) writer.join();
  const absl::Time stopped_at = absl::Now();

  // Every row closes: the relay's and the ack listener's links, and
  // recovery for what neither could finish.
  const bool all_sent =
      Eventually([&] { return Count("SELECT count(*) FROM outbox WHERE status <> 'SENT'") == 0; },
                 absl::Minutes(3));
  const absl::Time all_sent_at = absl::Now();
  EXPECT_TRUE(all_sent) << Count("SELECT count(*) FROM outbox WHERE status <> 'SENT'")
                        << " rows not SENT";

  const std::set<std::string> in_outbox = Ids("SELECT biz_key FROM outbox");
  const std::set<std::string> in_payments = Ids("SELECT id FROM payments");
  EXPECT_TRUE(Eventually([&] { return Booked().size() >= in_outbox.size(); }, absl::Minutes(1)));
  const std::map<std::string, int> booked = Booked();
  const int64_t republished = producer.recovery()->republished();
  producer.Stop();
  consumer->Stop();

  MutexLock lock(&outcomes.mu);
  // Nothing half-written: the business rows are exactly the outbox's.
  EXPECT_EQ(in_payments, in_outbox);
  // 0 lost: every write acknowledged OK is on the promoted server.
  int lost = 0;
  for (const std::string& id : outcomes.ok) {
    if (in_outbox.count(id) == 0 && ++lost <= 5) ADD_FAILURE() << id << " acknowledged, lost";
  }
  EXPECT_EQ(lost, 0);
  // Every failure is UNAVAILABLE; a failed write that is there all the same
  // committed as its COMMIT was cut off (uncertain).
  int uncertain = 0;
  for (const auto& [id, status] : outcomes.failed) {
    EXPECT_TRUE(absl::IsUnavailable(status)) << id << ": " << status;
    if (in_outbox.count(id) > 0) ++uncertain;
  }
  // Every row there was written by a writer, and each is booked exactly once.
  int duplicated = 0;
  int unbooked = 0;
  for (const std::string& id : in_outbox) {
    EXPECT_TRUE(outcomes.ok.count(id) > 0 || outcomes.failed.count(id) > 0) << id;
    auto b = booked.find(id);
    if (b == booked.end()) {
      if (++unbooked <= 5) ADD_FAILURE() << id << " not booked";
    } else if (b->second != 1) {
      if (++duplicated <= 5) ADD_FAILURE() << id << " booked " << b->second << " times";
    }
  }
  EXPECT_EQ(unbooked, 0);
  EXPECT_EQ(duplicated, 0);
  for (const auto& [id, times] : booked) EXPECT_EQ(in_outbox.count(id), 1u) << id << " booked";

  // The window in which writes failed: the first failure, to the first
  // success after it.
  absl::Time first_failure = absl::InfiniteFuture();
  for (absl::Time at : outcomes.failed_at) first_failure = std::min(first_failure, at);
  absl::Time first_success_after = absl::InfiniteFuture();
  for (absl::Time at : outcomes.ok_at) {
    if (at > first_failure) first_success_after = std::min(first_success_after, at);
  }
  printf(
      "failover under load: %zu writes OK, %zu failed (%d uncertain: committed though "
      "UNAVAILABLE); writes failed for %s (the first failure %s after the kill, the standby "
      "promoted %s after it); every row SENT %s after the kill (%s after the writers stopped); "
      "%lld rows re-published by "
      "recovery; %zu rows, %zu booked\n",
      outcomes.ok.size(), outcomes.failed.size(), uncertain,
      absl::FormatDuration(first_success_after - first_failure).c_str(),
      absl::FormatDuration(first_failure - killed_at).c_str(),
      absl::FormatDuration(promoted_at - killed_at).c_str(),
      absl::FormatDuration(all_sent_at - killed_at).c_str(),
      absl::FormatDuration(all_sent_at - stopped_at).c_str(), static_cast<long long>(republished),
      in_outbox.size(), booked.size());
}

}  // namespace
}  // namespace outbox::testing
