// PgGroupWriter against a server of scripts/postgres_node.sh: many writes
// in few transactions, each write failing alone (its business step, its
// message id or business key), the relay fed only committed rows, a
// server killed mid-run failing whole groups, and new writes held while the
// consumer lags (max_unsent, max_hold). One server for the binary;
// each test gets a schema of its own.
#include "shared/postgres/internal/pg_group_writer.h"

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/base/clock.h"
#include "shared/base/internal/mutex.h"
#include "shared/observability/metrics.h"
#include "shared/outbox/internal/reply_format.h"
#include "shared/postgres/pg_outbox_table.h"
#include "shared/postgres/pg_producer.h"
#include "shared/postgres/pg_schema.h"
#include "shared/testing/fakes.h"
#include "shared/testing/manual_clock.h"
#include "shared/testing/pg_servers.h"
#include "shared/testing/status_matchers.h"

namespace outbox::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

PgServersEnvironment* const kServer = AddPgServers("pg_group_writer_test");

// Takes the committed messages, and checks at once, on a connection of its
// own, that each is committed (visible outside the writer's transaction).
class CheckingRelay final : public RelayQueue {
 public:
  explicit CheckingRelay(const std::string& conninfo) {
    auto conn = PgConnection::Open(conninfo);
    EXPECT_OK(conn);
    if (conn.ok()) conn_ = std::move(conn).value();
  }
  using RelayQueue::Enqueue;
  void Enqueue(std::vector<OutgoingMessage> messages, absl::Time) override {
    std::vector<std::string> ids;
    for (const OutgoingMessage& m : messages) ids.push_back(m.message_id);
    auto r = conn_->Query("SELECT count(*) FROM outbox WHERE message_id = ANY($1::text[])",
                          {PgTextArray(ids)});
    MutexLock lock(&mu_);
    if (!r.ok() || r->Get(0, 0) != std::to_string(ids.size())) uncommitted_ += ids.size();
    for (std::string& id : ids) ids_.push_back(std::move(id));
  }
  std::vector<std::string> ids() {
    MutexLock lock(&mu_);
    return ids_;
  }
  bool has(const std::string& id) {
    MutexLock lock(&mu_);
    for (const std::string& i : ids_)
      if (i == id) return true;
    return false;
  }
  size_t uncommitted() {
    MutexLock lock(&mu_);
    return uncommitted_;
  }

 private:
  std::unique_ptr<PgConnection> conn_;
  Mutex mu_;
  std::vector<std::string> ids_ ABSL_GUARDED_BY(mu_);
  size_t uncommitted_ ABSL_GUARDED_BY(mu_) = 0;
};

// The outcomes of WriteAsync calls, by message id.
class Outcomes {
 public:
  PgGroupWriter::WriteDone For(const std::string& id) {
    return [this, id](absl::StatusOr<OutboxMessage> out) {
      MutexLock lock(&mu_);
      statuses_[id] = out.status();
    };
  }
  // Waits (up to a minute) for `n` outcomes.
  std::map<std::string, absl::Status> Await(size_t n) {
    MutexLock lock(&mu_);
    auto done = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return statuses_.size() >= n; };
    EXPECT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&done), absl::Minutes(1)));
    return statuses_;
  }

 private:
  Mutex mu_;
  std::map<std::string, absl::Status> statuses_ ABSL_GUARDED_BY(mu_);
};

MessageSpec Spec(const std::string& id, const std::string& key) {
  MessageSpec spec = MessageSpec::Of("payment", key, "body-" + id);
  spec.message_id = id;
  spec.topic = "payments";
  return spec;
}

// The business step of a payment: its row in payments, with the
// transaction's id.
PgBusinessWrite Pay(const std::string& id) {
  return [id](PgConnection& conn) {
    return conn.Query("INSERT INTO payments (id, txid) VALUES ($1, txid_current())", {id}).status();
  };
}

class PgGroupWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static std::atomic<int> next{0};
    const std::string name = absl::StrCat("g", next++);
    conninfo_ = FreshPgSchema(kServer->url(), name);
    ASSERT_FALSE(conninfo_.empty());
    auto test = PgConnection::Open(conninfo_);
    ASSERT_OK(test);
    test_ = std::move(test).value();
    ASSERT_OK(CreatePgOutboxTables(*test_));
    ASSERT_OK(test_->Exec("CREATE TABLE payments (id TEXT PRIMARY KEY, txid BIGINT NOT NULL)"));
    auto session = PgSession::Open(conninfo_);
    ASSERT_OK(session);
    session_ = std::move(session).value();
    outbox_ = std::make_unique<PgOutbox>(*session_, clock_);
    relay_ = std::make_unique<CheckingRelay>(conninfo_);
  }

  std::unique_ptr<PgGroupWriter> NewWriter(size_t max_batch = 512) {
    PgGroupWriterOptions options;
    options.max_batch = max_batch;
    EXPECT_OK(options.Validate());
    return std::make_unique<PgGroupWriter>(*session_, *outbox_, *relay_, clock_, metrics_, options);
  }

  PgConnection& test() { return *test_; }

  SystemClock clock_;
  MetricsRegistry metrics_;
  std::string conninfo_;
  std::unique_ptr<PgConnection> test_;
  std::unique_ptr<PgSession> session_;
  std::unique_ptr<PgOutbox> outbox_;
  std::unique_ptr<CheckingRelay> relay_;
};

// Writes queued from many threads while a group commits join the next
// groups: far fewer transactions than writes, every row there once, every
// message at the relay once.
TEST_F(PgGroupWriterTest, ManyThreadsShareFewTransactions) {
  auto writer = NewWriter(/*max_batch=*/64);
  writer->Start();
  constexpr int kThreads = 8;
  constexpr int kPerThread = 25;
  constexpr int kWrites = kThreads * kPerThread;
  std::atomic<int> queued{0};
  Outcomes outcomes;
  // The first group's business step holds it until every write is queued.
  writer->WriteAsync(
      Spec("gate", "gate"),
      [&](PgConnection& conn) -> absl::Status {
        const absl::Time deadline = absl::Now() + absl::Seconds(30);
        while (queued.load() < kWrites && absl::Now() < deadline)
          absl::SleepFor(absl::Milliseconds(1));
        return Pay("gate")(conn);
      },
      outcomes.For("gate"));
  std::vector<std::thread> threads;
  std::vector<std::string> expected = {"gate"};
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) expected.push_back(absl::StrCat("m-", t, "-", i));
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string id = absl::StrCat("m-", t, "-", i);
        writer->WriteAsync(Spec(id, "k" + id), Pay(id), outcomes.For(id));
        ++queued;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::map<std::string, absl::Status> got = outcomes.Await(kWrites + 1);
  for (const auto& [id, status] : got) EXPECT_OK(status) << id;
  EXPECT_EQ(writer->written(), kWrites + 1);
  // The gate's group (the gate, perhaps a few more), then groups of 64.
  EXPECT_LE(writer->groups_committed(), 1 + (kWrites + 63) / 64);
  EXPECT_EQ(writer->rewrites(), 0);
  EXPECT_EQ(PgCount(test(), "SELECT count(DISTINCT message_id) FROM outbox"), kWrites + 1);
  EXPECT_EQ(PgCount(test(), "SELECT count(*) FROM outbox"), kWrites + 1);
  EXPECT_EQ(PgCount(test(), "SELECT count(*) FROM payments"), kWrites + 1);
  EXPECT_EQ(PgCount(test(), "SELECT count(DISTINCT txid) FROM payments"),
            writer->groups_committed());
  EXPECT_THAT(relay_->ids(), UnorderedElementsAreArray(expected));
  EXPECT_EQ(relay_->uncommitted(), 0u);
  // The rows are whole: the payload and the group's time stamp.
  auto row = LoadPgOutboxRow(test(), "m-3-7");
  ASSERT_OK(row);
  ASSERT_TRUE(row->has_value());
  EXPECT_EQ((*row)->payload, "body-m-3-7");
  EXPECT_EQ((*row)->biz_key, "km-3-7");
  EXPECT_EQ((*row)->topic, "payments");
  EXPECT_EQ((*row)->status, OutboxStatus::kSending);
  EXPECT_GT((*row)->id, 0);
}

// A business step that fails (returning an error, or with a statement the
// server refused) fails its write alone; the rest of the group commits.
TEST_F(PgGroupWriterTest, AFailingBusinessStepFailsItsWriteAlone) {
  auto writer = NewWriter();
  Outcomes outcomes;
  // Queued before the writer starts: one group.
  writer->WriteAsync(Spec("a", "ka"), Pay("a"), outcomes.For("a"));
  writer->WriteAsync(
      Spec("b", "kb"),
      [](PgConnection& conn) -> absl::Status {
        EXPECT_OK(Pay("b")(conn));
        return absl::FailedPreconditionError("card declined");
      },
      outcomes.For("b"));
  // The server refuses its statement (a payment id taken): the transaction
  // is aborted until the savepoint is rolled back.
  writer->WriteAsync(Spec("c", "kc"), Pay("a"), outcomes.For("c"));
  // One that swallows the server's refusal leaves the transaction aborted:
  // it fails, in the middle of the group or at its end.
  auto swallowing = [](PgConnection& conn) {
    EXPECT_FALSE(Pay("a")(conn).ok());
    return absl::OkStatus();
  };
  writer->WriteAsync(Spec("e", "ke"), swallowing, outcomes.For("e"));
  writer->WriteAsync(Spec("d", "kd"), Pay("d"), outcomes.For("d"));
  writer->WriteAsync(Spec("f", "kf"), swallowing, outcomes.For("f"));
  writer->Start();
  std::map<std::string, absl::Status> got = outcomes.Await(6);
  EXPECT_OK(got["a"]);
  EXPECT_THAT(got["b"], StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("declined")));
  EXPECT_THAT(got["c"], StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_OK(got["d"]);
  EXPECT_THAT(got["e"], StatusIs(absl::StatusCode::kInternal, HasSubstr("aborted")));
  EXPECT_THAT(got["f"], StatusIs(absl::StatusCode::kInternal, HasSubstr("aborted")));
  EXPECT_EQ(writer->groups_committed(), 1);
  EXPECT_THAT(PgStrings(test(), "SELECT id FROM payments ORDER BY id"), ElementsAre("a", "d"));
  EXPECT_THAT(PgStrings(test(), "SELECT message_id FROM outbox ORDER BY id"),
              ElementsAre("a", "d"));
  EXPECT_THAT(relay_->ids(), ElementsAre("a", "d"));
}

// A message id or business key taken (by the table, or by an earlier write
// of the group) is ALREADY_EXISTS for that write alone, its business rows
// not written.
TEST_F(PgGroupWriterTest, ATakenIdOrKeyIsAlreadyExistsAlone) {
  auto writer = NewWriter();
  writer->Start();
  ASSERT_OK(writer->Write(Spec("first", "k1"), Pay("first")));
  writer->Stop();

  writer = NewWriter();
  Outcomes outcomes;
  writer->WriteAsync(Spec("x", "k1"), Pay("x"), outcomes.For("x"));           // the table's key
  writer->WriteAsync(Spec("first", "k9"), Pay("y0"), outcomes.For("first"));  // the table's id
  writer->WriteAsync(Spec("y", "k2"), Pay("y"), outcomes.For("y"));
  writer->WriteAsync(Spec("z", "k2"), Pay("z"), outcomes.For("z"));  // y's key
  writer->WriteAsync(Spec("w", "k3"), Pay("w"), outcomes.For("w"));
  writer->Start();
  std::map<std::string, absl::Status> got = outcomes.Await(5);
  EXPECT_THAT(got["x"], StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("payment/k1")));
  EXPECT_THAT(got["first"], StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("'first'")));
  EXPECT_OK(got["y"]);
  EXPECT_THAT(got["z"], StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("payment/k2")));
  EXPECT_OK(got["w"]);
  EXPECT_THAT(PgStrings(test(), "SELECT id FROM payments ORDER BY id"),
              ElementsAre("first", "w", "y"));
  EXPECT_THAT(PgStrings(test(), "SELECT message_id FROM outbox ORDER BY message_id"),
              ElementsAre("first", "w", "y"));
  EXPECT_EQ(writer->rewrites(), 0);
}

// Another writer commits a key of the group after the group looked for it:
// the group's one INSERT meets the unique violation, and the group is
// written again row by row, that write alone failing.
TEST_F(PgGroupWriterTest, AKeyTakenMeanwhileFailsThatWriteAlone) {
  auto other = PgConnection::Open(conninfo_);
  ASSERT_OK(other);
  OutboxMessage theirs = NewOutboxMessage(Spec("theirs", "k2"), clock_.NowMillis(), {});
  auto writer = NewWriter();
  Outcomes outcomes;
  writer->WriteAsync(
      Spec("a", "k1"),
      [&](PgConnection& conn) -> absl::Status {
        // The other writer, on its own connection, commits k2 now (the second
        // run finds it there).
        InsertPgOutboxRow(**other, theirs).status().IgnoreError();
        return Pay("a")(conn);
      },
      outcomes.For("a"));
  writer->WriteAsync(Spec("b", "k2"), Pay("b"), outcomes.For("b"));
  writer->WriteAsync(Spec("c", "k3"), Pay("c"), outcomes.For("c"));
  writer->Start();
  std::map<std::string, absl::Status> got = outcomes.Await(3);
  EXPECT_OK(got["a"]);
  EXPECT_THAT(got["b"], StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_OK(got["c"]);
  EXPECT_EQ(writer->rewrites(), 1);
  EXPECT_THAT(PgStrings(test(), "SELECT id FROM payments ORDER BY id"), ElementsAre("a", "c"));
  EXPECT_THAT(PgStrings(test(), "SELECT message_id FROM outbox ORDER BY message_id"),
              ElementsAre("a", "c", "theirs"));
  EXPECT_THAT(relay_->ids(), ElementsAre("a", "c"));
}

// Each caller hears its outcome after its message went to the relay, and the
// relay sees only committed rows.
TEST_F(PgGroupWriterTest, TheRelayGetsTheGroupAfterItsCommit) {
  auto writer = NewWriter();
  writer->Start();
  for (int i = 0; i < 5; ++i) {
    const std::string id = absl::StrCat("r", i);
    bool at_relay = false;
    Notification done;
    writer->WriteAsync(Spec(id, id), Pay(id), [&](absl::StatusOr<OutboxMessage> out) {
      EXPECT_OK(out);
      at_relay = relay_->has(id);
      done.Notify();
    });
    done.WaitForNotification();
    EXPECT_TRUE(at_relay) << id;
  }
  EXPECT_EQ(relay_->uncommitted(), 0u);
  // A failed write never reaches it.
  EXPECT_THAT(
      writer->Write(Spec("r9", "r9"), [](PgConnection&) { return absl::InternalError("no"); }),
      StatusIs(absl::StatusCode::kInternal));
  EXPECT_EQ(relay_->ids().size(), 5u);
}

// The server killed while threads write: every write of a group fails
// alike (UNAVAILABLE), nothing is half-written (a payment without its
// outbox row or the reverse), every write reported committed is there, and
// once the server is back the next write connects again.
TEST_F(PgGroupWriterTest, AKilledServerFailsWholeGroups) {
  auto writer = NewWriter(/*max_batch=*/16);
  writer->Start();
  Mutex mu;
  std::map<std::string, absl::Status> outcome;  // by message id
  std::map<std::string, std::string> txid;      // by message id, from the business step
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5000; ++i) {
        const std::string id = absl::StrCat("m-", t, "-", i);
        absl::StatusOr<OutboxMessage> out =
            writer->Write(Spec(id, id), [&, id](PgConnection& conn) -> absl::Status {
              auto r = conn.Query(
                  "INSERT INTO payments (id, txid) VALUES ($1, txid_current()) RETURNING txid",
                  {id});
              if (!r.ok()) return r.status();
              MutexLock lock(&mu);
              txid[id] = std::string(r->Get(0, 0));
              return absl::OkStatus();
            });
        MutexLock lock(&mu);
        outcome[id] = out.status();
        if (!out.ok()) return;  // the server is gone
      }
    });
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (writer->written() < 200 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_GE(writer->written(), 200);
  PgServers::Kill(kServer->servers().primary());
  for (std::thread& t : threads) t.join();
  PgServers::Start(kServer->servers().primary());

  // Back: the writer's session connects again at the next group.
  auto check = PgConnection::Open(conninfo_);
  ASSERT_OK(check);
  EXPECT_OK(writer->Write(Spec("after", "after"), Pay("after")));

  std::set<std::string> payments, rows;
  for (std::string& id : PgStrings(**check, "SELECT id FROM payments")) payments.insert(id);
  for (std::string& id : PgStrings(**check, "SELECT message_id FROM outbox")) rows.insert(id);
  EXPECT_EQ(payments, rows);  // nothing half-written
  MutexLock lock(&mu);
  std::map<std::string, std::set<absl::StatusCode>> codes_by_txid;
  int failed = 0;
  for (const auto& [id, status] : outcome) {
    if (status.ok()) {
      EXPECT_EQ(rows.count(id), 1u) << id;
    } else {
      ++failed;
      EXPECT_THAT(status, StatusIs(absl::StatusCode::kUnavailable)) << id;
    }
    if (txid.count(id) > 0) codes_by_txid[txid[id]].insert(status.code());
  }
  EXPECT_GE(failed, 8);  // each thread's last
  // A group's writes share one outcome.
  for (const auto& [tx, codes] : codes_by_txid) EXPECT_EQ(codes.size(), 1u) << "txid " << tx;
}

// Polls `done` until it holds or 30 s pass.
bool Eventually(const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

// A write queued with WriteAsync, and whether it committed.
class Pending {
 public:
  PgGroupWriter::WriteDone Done() {
    return [this](absl::StatusOr<OutboxMessage> row) {
      EXPECT_OK(row);
      done_.Notify();
    };
  }
  bool committed() const { return done_.HasBeenNotified(); }
  // Up to 30 s: a hold the test did not expect lasts a minute.
  bool Wait() { return done_.WaitForNotificationWithTimeout(absl::Seconds(30)); }

 private:
  Notification done_;
};

// The backpressure (max_unsent, max_hold): the consumer's acknowledgements
// applied on a session of their own, as the ack listener's, through
// PgAckRepository; the writer's clock in the test's hands.
class PgGroupWriterHoldTest : public PgGroupWriterTest {
 protected:
  void SetUp() override {
    PgGroupWriterTest::SetUp();
    auto acks = PgSession::Open(conninfo_);
    ASSERT_OK(acks);
    acks_session_ = std::move(acks).value();
    acks_outbox_ = std::make_unique<PgOutbox>(*acks_session_, clock_);
  }

  std::unique_ptr<PgGroupWriter> HoldingWriter(int64_t max_unsent, absl::Duration max_hold) {
    PgGroupWriterOptions options;
    options.max_unsent = max_unsent;
    options.max_hold = max_hold;
    EXPECT_OK(options.Validate());
    return std::make_unique<PgGroupWriter>(*session_, *outbox_, *relay_, manual_, metrics_,
                                           options);
  }

  // The consumer's replies for `ids` applied (unknown ids change nothing).
  void Ack(PgGroupWriter& writer, const std::vector<std::string>& ids) {
    PgAckRepository acks(*acks_outbox_, writer);
    ASSERT_OK(acks.RecordAcks(ids));
  }

  int64_t Sending() {
    return PgCount(test(), "SELECT count(*) FROM outbox WHERE status = 'SENDING'");
  }

  ManualClock manual_;
  std::unique_ptr<PgSession> acks_session_;
  std::unique_ptr<PgOutbox> acks_outbox_;
};

// While acknowledgements are applied and the database holds max_unsent
// SENDING rows (another replica's among them), a new write waits; an
// acknowledgement wakes it to count again, and it goes once the backlog is
// under the bound.
TEST_F(PgGroupWriterHoldTest, WhileTheConsumerLagsNewWritesWaitForItsAcks) {
  auto writer = HoldingWriter(/*max_unsent=*/2, /*max_hold=*/absl::Minutes(1));  // acks end it
  writer->Start();
  for (const char* id : {"0", "1"}) ASSERT_OK(writer->Write(Spec(id, id), Pay(id)));
  // Another replica's row on the same database: the consumer's backlog too.
  ASSERT_OK(InsertPgOutboxRow(test(),
                              NewOutboxMessage(Spec("theirs", "theirs"), clock_.NowMillis(), {})));
  EXPECT_EQ(writer->holds(), 0);  // no acks yet: nothing is held for them
  // Acks flow, and 2 rows are still SENDING: the consumer lags. The hold
  // starts after the next group.
  Ack(*writer, {"0"});
  ASSERT_OK(writer->Write(Spec("2", "2"), Pay("2")));
  Pending held;
  writer->WriteAsync(Spec("3", "3"), Pay("3"), held.Done());
  ASSERT_TRUE(Eventually([&] { return writer->holds() == 1; }));
  EXPECT_FALSE(held.committed());
  // An acknowledgement that closes nothing: counted again, still 3 SENDING,
  // held again.
  Ack(*writer, {"unknown"});
  ASSERT_TRUE(Eventually([&] { return writer->holds() == 2; }));
  EXPECT_FALSE(held.committed());
  EXPECT_EQ(Sending(), 3);
  // Under the bound again: the held write goes into the next group.
  Ack(*writer, {"1", "theirs"});
  ASSERT_TRUE(held.Wait());
  writer->Stop();
  EXPECT_EQ(writer->holds(), 2);
  EXPECT_THAT(relay_->ids(), ElementsAre("0", "1", "2", "3"));
  const std::string text = metrics_.Render();
  EXPECT_NE(text.find("\noutbox_writer_holds_total 2\n"), std::string::npos) << text;
}

// No acknowledgement comes: the hold ends after max_hold and the write goes.
TEST_F(PgGroupWriterHoldTest, AHoldEndsAfterMaxHold) {
  auto writer = HoldingWriter(/*max_unsent=*/1, /*max_hold=*/absl::Milliseconds(200));
  writer->Start();
  ASSERT_OK(writer->Write(Spec("0", "0"), Pay("0")));
  Ack(*writer, {"unknown"});
  ASSERT_OK(writer->Write(Spec("1", "1"), Pay("1")));
  Pending held;
  writer->WriteAsync(Spec("2", "2"), Pay("2"), held.Done());
  ASSERT_TRUE(held.Wait());
  EXPECT_EQ(writer->holds(), 1);
  EXPECT_EQ(Sending(), 3);
}

// No acknowledgement for a second: the consumer (or the broker) is away and
// the backlog grows without holding anyone.
TEST_F(PgGroupWriterHoldTest, WithoutAcksForASecondNothingIsHeld) {
  auto writer = HoldingWriter(/*max_unsent=*/1, /*max_hold=*/absl::Minutes(1));
  writer->Start();
  ASSERT_OK(writer->Write(Spec("0", "0"), Pay("0")));
  Ack(*writer, {"unknown"});
  manual_.Advance(absl::Milliseconds(1001));
  for (const char* id : {"1", "2", "3"}) {
    Pending write;
    writer->WriteAsync(Spec(id, id), Pay(id), write.Done());
    ASSERT_TRUE(write.Wait()) << id;
  }
  EXPECT_EQ(writer->holds(), 0);
  EXPECT_EQ(Sending(), 4);
}

// max_unsent 0: never held, acknowledgements or not.
TEST_F(PgGroupWriterHoldTest, MaxUnsentZeroHoldsNothing) {
  auto writer = HoldingWriter(/*max_unsent=*/0, /*max_hold=*/absl::Minutes(1));
  writer->Start();
  ASSERT_OK(writer->Write(Spec("0", "0"), Pay("0")));
  for (const char* id : {"1", "2", "3"}) {
    Ack(*writer, {"unknown"});
    Pending write;
    writer->WriteAsync(Spec(id, id), Pay(id), write.Done());
    ASSERT_TRUE(write.Wait()) << id;
  }
  EXPECT_EQ(writer->holds(), 0);
}

// Stopping ends a hold at once: the held write commits.
TEST_F(PgGroupWriterHoldTest, StoppingEndsAHold) {
  auto writer = HoldingWriter(/*max_unsent=*/1, /*max_hold=*/absl::Minutes(1));
  writer->Start();
  ASSERT_OK(writer->Write(Spec("0", "0"), Pay("0")));
  Ack(*writer, {"unknown"});
  ASSERT_OK(writer->Write(Spec("1", "1"), Pay("1")));
  Pending held;
  writer->WriteAsync(Spec("2", "2"), Pay("2"), held.Done());
  ASSERT_TRUE(Eventually([&] { return writer->holds() == 1; }));
  writer->Stop();
  EXPECT_TRUE(held.committed());
  EXPECT_EQ(Sending(), 3);
}

// PgProducer's ack listener is what tells its writer: a reply taken from the
// broker and applied wakes a held write.
TEST_F(PgGroupWriterHoldTest, PgProducersAckListenerEndsAHold) {
  PgProducer::Options options;
  options.queue = "payments";
  options.signing = Signing::Unsigned();
  options.clock = &manual_;
  options.metrics = &metrics_;
  options.pg_group_commit.max_unsent = 1;
  options.pg_group_commit.max_hold = absl::Minutes(1);  // only acks end it
  auto publisher = std::make_unique<FakePublisher>();
  auto replies = std::make_unique<FakeConsumer>();
  FakeConsumer& broker = *replies;
  auto producer = PgProducer::Create(*session_, *acks_session_, options, std::move(publisher),
                                     std::move(replies));
  ASSERT_OK(producer);
  auto reply = [&](const std::string& id) {
    broker.Push(DeliveryOf(DefaultReply("payments.replies", id, id, Applied{})));
    (*producer)->AckStep();
  };
  ASSERT_OK((*producer)->Write(Spec("a", "a"), Pay("a")));
  ASSERT_OK((*producer)->Write(Spec("b", "b"), Pay("b")));
  reply("a");  // acks flow; "b" is SENDING
  ASSERT_OK((*producer)->Write(Spec("c", "c"), Pay("c")));
  Counter& holds = metrics_.AddCounter("outbox_writer_holds_total",
                                       "groups of new writes held back while the consumer lagged");
  Pending held;
  (*producer)->WriteAsync(Spec("d", "d"), Pay("d"), held.Done());
  ASSERT_TRUE(Eventually([&] { return holds.value() == 1; }));
  EXPECT_FALSE(held.committed());
  reply("b");  // "c" still SENDING: held again
  ASSERT_TRUE(Eventually([&] { return holds.value() == 2; }));
  EXPECT_FALSE(held.committed());
  reply("c");
  ASSERT_TRUE(held.Wait());
  EXPECT_EQ((*producer)->acknowledged(), 3);
  EXPECT_EQ(holds.value(), 2);
  (*producer)->Stop();
}

TEST(PgGroupWriterOptionsTest, Validate) {
  EXPECT_OK(PgGroupWriterOptions{}.Validate());
  // The backpressure's defaults are GroupWriter's.
  EXPECT_EQ(PgGroupWriterOptions{}.max_unsent, GroupWriterOptions{}.max_unsent);
  EXPECT_EQ(PgGroupWriterOptions{}.max_hold, GroupWriterOptions{}.max_hold);
  PgGroupWriterOptions o;
  o.max_batch = 0;
  EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_batch")));
  o = {};
  o.max_unsent = -1;
  EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_unsent")));
  o = {};
  o.max_hold = absl::Milliseconds(-1);
  EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_hold")));
}

}  // namespace
}  // namespace outbox::testing
