// The consumer role on PostgreSQL: PgMessageHandler / PgApply on a server
// of scripts/postgres_node.sh. The handler's batches driven by hand (new,
// duplicate, applied_by_key, reject, a failing Apply, a store that cannot
// write, two sessions booking copies of one message at the same time), and
// end to end with the test run's RabbitMQ node: PgProducer's payments
// booked by two consumers sharing one inbox, copies included, each once.
#include "shared/postgres/pg_message_handler.h"

#include <stdio.h>

#include <atomic>
#include <deque>
#include <list>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/amqp/amqp_url.h"
#include "shared/amqp/internal/amqp_transport.h"
#include "shared/base/status_macros.h"
#include "shared/outbox/internal/dead_letter.h"
#include "shared/outbox/repository.h"
#include "shared/postgres/internal/pg_outbox.h"
#include "shared/postgres/pg_producer.h"
#include "shared/postgres/pg_schema.h"
#include "shared/roles/consumer.h"
#include "shared/testing/pg_servers.h"
#include "shared/testing/status_matchers.h"
#include "tests/support/broker.h"

namespace outbox::testing {
namespace {

using ::testing::HasSubstr;

PgServersEnvironment* const kServer = AddPgServers("pg_consumer_test");

// A schema of its own for each test: the connection string that works in it,
// with `extra` server options ("%20-c..." each).
std::string FreshSchema(const std::string& extra = "") {
  static std::atomic<int> next{0};
  return FreshPgSchema(kServer->url(), absl::StrCat("c", next++), extra);
}

std::string One(PgConnection& conn, const std::string& sql) {
  auto r = conn.Query(sql);
  EXPECT_OK(r);
  if (!r.ok() || r->rows() == 0) return "<none>";
  return std::string(r->Get(0, 0));
}

Delivery Payment(const std::string& message_id, const std::string& payment_id) {
  Delivery d;
  d.message_id = message_id;
  d.type = "payment";
  d.shard_key = payment_id;
  d.body = payment_id;
  return d;
}

// Books a payment in `booked`; its body "fail" fails, "throw" throws,
// "bad" is refused by the business (answered as a reject, or dead-lettered
// when its shard_key is "old-publisher").
class Booking final : public PgMessageHandler<Delivery> {
 public:
  explicit Booking(PgSession& session, PgHandlerOptions options = {})
      : PgMessageHandler(session, SystemClock::Get(), std::move(options)) {}

  absl::StatusOr<Delivery> Decode(const Delivery& d) override { return d; }
  std::string BusinessKey(const Delivery& d) override { return d.shard_key; }
  std::string Rejects(const Delivery& d) override {
    return d.body == "bad" ? "the payment is refused" : "";
  }
  bool AnswersRejects(const Delivery& d) override { return d.shard_key != "old-publisher"; }
  absl::StatusOr<std::string> Apply(PgConnection& tx, const Delivery& d) override {
    ++applies;
    if (before_apply) before_apply(d);
    if (d.body == "fail") return absl::FailedPreconditionError("the payment cannot be booked");
    if (d.body == "throw") throw std::runtime_error("a bug in Apply");
    const std::string reference = absl::StrCat("booking-", d.body, "-", tag);
    RETURN_IF_ERROR(tx.Query("INSERT INTO booked (payment_id, reference) VALUES ($1, $2)",
                             {d.shard_key, reference})
                        .status());
    if (after_apply) after_apply(d);
    return reference;
  }

  std::atomic<int> applies{0};
  std::string tag = "a";
  std::function<void(const Delivery&)> before_apply;
  std::function<void(const Delivery&)> after_apply;
};

// Runs one batch of `deliveries` through the ConsumerHandler interface, as
// the consumer role does; the deliveries are kept to the end of the test
// binary, as the batch's handler may look at them until the next batch.
absl::StatusOr<std::vector<Applied>> RunBatch(ConsumerHandler& h,
                                              std::vector<Delivery> deliveries) {
  static absl::Mutex mu;
  static std::list<std::vector<Delivery>>* const kept = new std::list<std::vector<Delivery>>;
  const std::vector<Delivery>* batch;
  {
    absl::MutexLock lock(&mu);
    kept->push_back(std::move(deliveries));
    batch = &kept->back();
  }
  h.Clear();
  for (const Delivery& d : *batch) RETURN_IF_ERROR(h.Add(d));
  return h.ApplyBatch();
}

class PgMessageHandlerTest : public ::testing::Test {
 protected:
  void SetUp() override { Connect(""); }

  void Connect(const std::string& extra) {
    conninfo_ = FreshSchema(extra);
    auto test = PgConnection::Open(conninfo_);
    ASSERT_OK(test);
    test_ = std::move(test).value();
    ASSERT_OK(CreatePgInboxTable(*test_));
    ASSERT_OK(test_->Exec("CREATE TABLE booked (payment_id TEXT PRIMARY KEY, reference TEXT)"));
    session_ = OpenSession();
  }

  std::unique_ptr<PgSession> OpenSession() {
    auto s = PgSession::Open(conninfo_);
    EXPECT_OK(s);
    return s.ok() ? std::move(s).value() : nullptr;
  }

  int64_t InboxRows() { return PgCount(*test_, "SELECT count(*) FROM inbox"); }
  int64_t BookedRows() { return PgCount(*test_, "SELECT count(*) FROM booked"); }

  std::string conninfo_;
  std::unique_ptr<PgConnection> test_;
  std::unique_ptr<PgSession> session_;
};

// A new message is applied and recorded in the inbox with its key and
// reference, in the batch's one transaction; its reply says applied.
TEST_F(PgMessageHandlerTest, NewMessagesAreAppliedAndRecorded) {
  Booking h(*session_);
  auto applied = RunBatch(h, {Payment("m1", "p1"), Payment("m2", "p2")});
  ASSERT_OK(applied);
  ASSERT_EQ(applied->size(), 2u);
  EXPECT_FALSE((*applied)[0].duplicate);
  EXPECT_EQ((*applied)[0].reference, "booking-p1-a");
  EXPECT_EQ((*applied)[1].reference, "booking-p2-a");
  EXPECT_EQ(BookedRows(), 2);
  EXPECT_EQ(InboxRows(), 2);
  EXPECT_EQ(One(*test_, "SELECT biz_key || ' ' || reference FROM inbox WHERE message_id = 'm1'"),
            "p1 booking-p1-a");
  std::vector<Reply> replies = static_cast<ConsumerHandler&>(h).Answer(*applied, {"r", "r"});
  ASSERT_EQ(replies.size(), 2u);
  EXPECT_EQ(replies[0].message.topic, "r");
  EXPECT_EQ(replies[0].message.type, kReplyType);
  EXPECT_THAT(replies[0].message.body, HasSubstr("m1\napplied\np1\nbooking-p1-a"));
}

// A copy, in a later batch or in the same one, changes nothing and is
// answered as a duplicate with the reference the first copy made.
TEST_F(PgMessageHandlerTest, DuplicateIsAnsweredWithTheFirstReference) {
  Booking h(*session_);
  ASSERT_OK(RunBatch(h, {Payment("m1", "p1")}));
  h.tag = "b";  // a second Apply would say so
  auto applied = RunBatch(h, {Payment("m1", "p1"), Payment("m2", "p2"), Payment("m2", "p2")});
  ASSERT_OK(applied);
  EXPECT_TRUE((*applied)[0].duplicate);
  EXPECT_EQ((*applied)[0].reference, "booking-p1-a");
  EXPECT_FALSE((*applied)[1].duplicate);
  EXPECT_TRUE((*applied)[2].duplicate);
  EXPECT_EQ((*applied)[2].reference, "booking-p2-b");
  EXPECT_EQ(h.applies.load(), 2);
  EXPECT_EQ(BookedRows(), 2);
  EXPECT_EQ(InboxRows(), 2);
  std::vector<Reply> replies = static_cast<ConsumerHandler&>(h).Answer(*applied, {"r", "r", "r"});
  EXPECT_THAT(replies[0].message.body, HasSubstr("m1\nduplicate\np1\nbooking-p1-a"));
}

// applied_by_key: a message id the inbox does not know whose key the
// adopter's table holds is a duplicate with that row's reference, and is
// recorded by its id.
TEST_F(PgMessageHandlerTest, AppliedByKeyFindsAChangeMadeUnderAnotherId) {
  ASSERT_OK(test_->Exec("INSERT INTO booked VALUES ('p1', 'booking-before')"));
  Booking h(*session_, {"inbox", AppliedByKey{"booked", "payment_id", "reference"}});
  auto applied = RunBatch(h, {Payment("m9", "p1")});
  ASSERT_OK(applied);
  EXPECT_TRUE((*applied)[0].duplicate);
  EXPECT_EQ((*applied)[0].reference, "booking-before");
  EXPECT_EQ(h.applies.load(), 0);
  EXPECT_EQ(One(*test_, "SELECT reference FROM inbox WHERE message_id = 'm9'"), "booking-before");
  // Two messages of one key in a batch: the second finds the first's change.
  applied = RunBatch(h, {Payment("m10", "p5"), Payment("m11", "p5")});
  ASSERT_OK(applied);
  EXPECT_FALSE((*applied)[0].duplicate);
  EXPECT_TRUE((*applied)[1].duplicate);
  EXPECT_EQ((*applied)[1].reference, "booking-p5-a");
  EXPECT_EQ(h.applies.load(), 1);
  EXPECT_EQ(One(*test_, "SELECT reference FROM inbox WHERE message_id = 'm11'"), "booking-p5-a");
}

// A new message Rejects refuses writes nothing: answered with the reject,
// or dead-lettered for a publisher that does not understand rejects.
TEST_F(PgMessageHandlerTest, RejectWritesNothing) {
  Booking h(*session_);
  Delivery old = Payment("m2", "old-publisher");
  old.body = "bad";
  Delivery refused = Payment("m1", "p1");
  refused.body = "bad";
  auto applied = RunBatch(h, {refused, old, Payment("m3", "p3"), refused});
  ASSERT_OK(applied);
  EXPECT_EQ((*applied)[0].rejected_reason, "the payment is refused");
  EXPECT_EQ((*applied)[1].dead_letter_reason, "the payment is refused");
  EXPECT_FALSE((*applied)[2].duplicate);
  EXPECT_EQ((*applied)[3].rejected_reason, "the payment is refused");  // its copy, alike
  EXPECT_EQ(InboxRows(), 1);
  EXPECT_EQ(BookedRows(), 1);
  std::vector<Reply> replies =
      static_cast<ConsumerHandler&>(h).Answer(*applied, {"r", "r", "r", "r"});
  ASSERT_EQ(replies.size(), 3u);  // the dead-lettered one is not answered
  EXPECT_THAT(replies[0].message.body, HasSubstr("m1\nrejected\np1\nthe payment is refused"));
  EXPECT_EQ(replies[1].answers, std::vector<size_t>{2});
}

// An Apply that fails, or throws, rolls the whole batch back with an error
// that is not the store's (the consumer applies one at a time and
// dead-letters it); the session stays usable.
TEST_F(PgMessageHandlerTest, FailingApplyRollsTheBatchBack) {
  Booking h(*session_);
  Delivery fail = Payment("m2", "p2");
  fail.body = "fail";
  auto applied = RunBatch(h, {Payment("m1", "p1"), fail});
  EXPECT_THAT(applied.status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_FALSE(StoreUnavailable(applied.status()));
  Delivery thrown = Payment("m3", "p3");
  thrown.body = "throw";
  applied = RunBatch(h, {Payment("m1", "p1"), thrown});
  EXPECT_THAT(applied.status(), StatusIs(absl::StatusCode::kInternal, HasSubstr("a bug in Apply")));
  EXPECT_FALSE(StoreUnavailable(applied.status()));
  EXPECT_EQ(InboxRows(), 0);
  EXPECT_EQ(BookedRows(), 0);
  ASSERT_OK(RunBatch(h, {Payment("m1", "p1")}));
  EXPECT_EQ(InboxRows(), 1);
}

// A store that cannot write (here: the inbox locked by another transaction
// past lock_timeout) fails the batch UNAVAILABLE: the consumer holds it.
TEST_F(PgMessageHandlerTest, StoreThatCannotWriteIsUnavailable) {
  Connect("%20-clock_timeout%3D200ms");
  Booking h(*session_);
  ASSERT_OK(test_->Exec("BEGIN; LOCK TABLE inbox IN ACCESS EXCLUSIVE MODE"));
  auto applied = RunBatch(h, {Payment("m1", "p1")});
  EXPECT_TRUE(StoreUnavailable(applied.status())) << applied.status();
  ASSERT_OK(test_->Exec("ROLLBACK"));
  ASSERT_OK(RunBatch(h, {Payment("m1", "p1")}));
  EXPECT_EQ(InboxRows(), 1);
}

// The consumer role prunes the inbox through processed_log().
TEST_F(PgMessageHandlerTest, ProcessedLogPrunesTheInbox) {
  Booking h(*session_);
  ASSERT_OK(RunBatch(h, {Payment("m1", "p1"), Payment("m2", "p2")}));
  ProcessedLog* log = static_cast<ConsumerHandler&>(h).processed_log();
  ASSERT_NE(log, nullptr);
  auto pruned = log->PruneProcessed(SystemClock::Get().NowMillis() + 1, 10);
  ASSERT_OK(pruned);
  EXPECT_EQ(*pruned, 2);
  EXPECT_EQ(InboxRows(), 0);
}

// An after_apply hook that, at its first call only, says so and waits to be
// released: the transaction stays open, its claims held.
std::function<void(const Delivery&)> HoldFirstApply(absl::Notification* applied,
                                                    absl::Notification* release) {
  auto held = std::make_shared<std::atomic<bool>>(false);
  return [held, applied, release](const Delivery&) {
    if (held->exchange(true)) return;
    applied->Notify();
    release->WaitForNotification();
  };
}

// Waits until a statement of another session waits on a lock.
bool SomeoneWaitsOnALock(PgConnection& conn) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    if (PgCount(conn, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'") > 0) {
      return true;
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

// Two consumers (a handler and a session each) on one inbox apply copies of
// one message at the same time: the first holds its transaction open after
// its Apply; the second's claim waits on the first's row, and once the first
// commits the second answers a duplicate with the first's reference, its
// Apply never run. Nothing is dead-lettered, the payment is booked once.
TEST_F(PgMessageHandlerTest, ConcurrentCopiesAcrossSessionsBookOnce) {
  std::unique_ptr<PgSession> second_session = OpenSession();
  ASSERT_NE(second_session, nullptr);
  Booking first(*session_);
  Booking second(*second_session);
  second.tag = "b";
  absl::Notification applied_first, release_first;
  first.after_apply = HoldFirstApply(&applied_first, &release_first);
  absl::StatusOr<std::vector<Applied>> a, b;
  std::thread t1([&] { a = RunBatch(first, {Payment("m0", "p0"), Payment("m1", "p1")}); });
  applied_first.WaitForNotification();  // m0 claimed and booked, uncommitted
  std::thread t2([&] { b = RunBatch(second, {Payment("m0", "p0"), Payment("m2", "p2")}); });
  EXPECT_TRUE(SomeoneWaitsOnALock(*test_));
  release_first.Notify();
  t1.join();
  t2.join();
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_FALSE((*a)[0].duplicate);
  EXPECT_EQ((*a)[0].reference, "booking-p0-a");
  EXPECT_TRUE((*b)[0].duplicate);
  EXPECT_EQ((*b)[0].reference, "booking-p0-a");
  EXPECT_TRUE((*b)[0].dead_letter_reason.empty());
  EXPECT_FALSE((*b)[1].duplicate);
  EXPECT_EQ(second.applies.load(), 1);  // m2 only
  EXPECT_EQ(BookedRows(), 3);
  EXPECT_EQ(InboxRows(), 3);
}

// The same, the first rolling back: the second's claim then goes through
// and it applies its copy.
TEST_F(PgMessageHandlerTest, ConcurrentCopyAppliesWhenTheFirstRollsBack) {
  std::unique_ptr<PgSession> second_session = OpenSession();
  ASSERT_NE(second_session, nullptr);
  Booking first(*session_);
  Booking second(*second_session);
  second.tag = "b";
  absl::Notification applied_first, release_first;
  first.after_apply = HoldFirstApply(&applied_first, &release_first);
  Delivery fail = Payment("m1", "p1");
  fail.body = "fail";
  absl::StatusOr<std::vector<Applied>> a, b;
  std::thread t1([&] { a = RunBatch(first, {Payment("m0", "p0"), fail}); });
  applied_first.WaitForNotification();
  std::thread t2([&] { b = RunBatch(second, {Payment("m0", "p0")}); });
  EXPECT_TRUE(SomeoneWaitsOnALock(*test_));
  release_first.Notify();
  t1.join();
  t2.join();
  EXPECT_THAT(a.status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_OK(b);
  EXPECT_FALSE((*b)[0].duplicate);
  EXPECT_EQ((*b)[0].reference, "booking-p0-b");
  EXPECT_EQ(BookedRows(), 1);
  EXPECT_EQ(InboxRows(), 1);
}

// Two consumers given copies of two messages in opposite orders claim them
// in one order (message ids'), so the second waits for the first instead of
// deadlocking: the first applies both, the second answers both as
// duplicates with the first's references.
TEST_F(PgMessageHandlerTest, CopiesClaimedInOppositeOrdersBookOnce) {
  std::unique_ptr<PgSession> second_session = OpenSession();
  ASSERT_NE(second_session, nullptr);
  Booking first(*session_);
  Booking second(*second_session);
  second.tag = "b";
  absl::Notification applied_first, release_first;
  first.after_apply = HoldFirstApply(&applied_first, &release_first);
  absl::StatusOr<std::vector<Applied>> a, b;
  std::thread t1([&] { a = RunBatch(first, {Payment("m0", "p0"), Payment("m1", "p1")}); });
  applied_first.WaitForNotification();  // m0 and m1 claimed by the first
  // The second claims m0 first, and waits on the first.
  std::thread t2([&] { b = RunBatch(second, {Payment("m1", "p1"), Payment("m0", "p0")}); });
  EXPECT_TRUE(SomeoneWaitsOnALock(*test_));
  release_first.Notify();
  t1.join();
  t2.join();
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_FALSE((*a)[0].duplicate);
  EXPECT_FALSE((*a)[1].duplicate);
  EXPECT_TRUE((*b)[0].duplicate);
  EXPECT_TRUE((*b)[1].duplicate);
  EXPECT_EQ((*b)[1].reference, "booking-p0-a");  // m0
  EXPECT_EQ((*b)[0].reference, "booking-p1-a");  // m1
  EXPECT_EQ(second.applies.load(), 0);
  EXPECT_EQ(BookedRows(), 2);
  EXPECT_EQ(InboxRows(), 2);
}

// ---- End to end, with the test run's broker.

constexpr int kThreads = 8;
constexpr int kPerThread = 25;
constexpr int kMessages = kThreads * kPerThread;
constexpr int kCopiedPerThread = 8;  // of each writer's payments, published again twice each
constexpr int kCopied = kThreads * kCopiedPerThread;

class PgConsumerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    conninfo_ = FreshSchema();
    queue_ = UniqueName("pg.bookings");
    auto test = PgConnection::Open(conninfo_);
    ASSERT_OK(test);
    test_ = std::move(test).value();
    ASSERT_OK(CreatePgOutboxTables(*test_));
    ASSERT_OK(CreatePgInboxTable(*test_));
    ASSERT_OK(test_->Exec("CREATE TABLE payments (id TEXT PRIMARY KEY)"));
    ASSERT_OK(test_->Exec("CREATE TABLE booked (payment_id TEXT PRIMARY KEY, reference TEXT)"));
    auto amqp = AmqpUrl::Parse(TestBroker().amqp_url);
    ASSERT_OK(amqp);
    amqp_ = *amqp;
  }

  // A consumer process: its session, its handler, its broker connections.
  struct Process {
    std::unique_ptr<PgSession> session;
    std::unique_ptr<PgApply> handler;
    std::unique_ptr<Consumer> consumer;
  };
  Process StartConsumer(const std::string& name) {
    Process p;
    auto session = PgSession::Open(conninfo_);
    EXPECT_OK(session);
    if (!session.ok()) return p;
    p.session = std::move(session).value();
    p.handler = std::make_unique<PgApply>(
        *p.session, "payment",
        [name](PgConnection& tx, const Delivery& payment) -> absl::StatusOr<std::string> {
          const std::string reference = absl::StrCat("booked-", payment.body, "-by-", name);
          RETURN_IF_ERROR(tx.Query("INSERT INTO booked (payment_id, reference) VALUES ($1, $2)",
                                   {payment.body, reference})
                              .status());
          return reference;
        });
    Consumer::Options options;
    options.amqp = amqp_;
    options.queue = queue_;
    options.name = name;
    options.signing = Signing::Unsigned();
    auto consumer = Consumer::Start(*p.handler, options);
    EXPECT_OK(consumer);
    if (consumer.ok()) p.consumer = std::move(consumer).value();
    return p;
  }

  // The ids the writers hand to the copier as they are written.
  class Handoff {
   public:
    void Put(std::string id) {
      absl::MutexLock lock(&mu_);
      ids_.push_back(std::move(id));
    }
    // The next id, "" if none came within a minute.
    std::string Take() {
      absl::MutexLock lock(&mu_);
      auto some = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !ids_.empty(); };
      if (!mu_.AwaitWithTimeout(absl::Condition(&some), absl::Minutes(1))) return "";
      std::string id = std::move(ids_.front());
      ids_.pop_front();
      return id;
    }

   private:
    absl::Mutex mu_;
    std::deque<std::string> ids_ ABSL_GUARDED_BY(mu_);
  };

  // Publishes `count` rows again as the relay did, twice each, as their ids
  // come (while their first copies are on their way); returns once the
  // broker confirmed every copy.
  void PublishCopies(Handoff& handoff, int count) {
    AmqpPublisher publisher(amqp_, Topology{{queue_}}, "copies");
    ASSERT_OK(publisher.Connect());
    int published = 0;
    for (int n = 0; n < count; ++n) {
      const std::string id = handoff.Take();
      ASSERT_FALSE(id.empty());
      auto row = LoadPgOutboxRow(*test_, id);
      ASSERT_OK(row);
      ASSERT_TRUE(row->has_value()) << id;
      for (int copy = 0; copy < 2; ++copy) {
        ASSERT_OK(publisher.Publish(ToOutgoing(**row)));
        ++published;
      }
    }
    int settled = 0;
    const absl::Time deadline = absl::Now() + absl::Minutes(1);
    while (settled < published && absl::Now() < deadline) {
      std::vector<Confirm> confirms;
      ASSERT_OK(publisher.ReadConfirms(absl::Milliseconds(200), &confirms));
      for (const Confirm& c : confirms) {
        EXPECT_TRUE(c.ok);
        ++settled;
      }
    }
    EXPECT_EQ(settled, published);
  }

  static bool Eventually(const std::function<bool()>& done, absl::Duration timeout) {
    const absl::Time deadline = absl::Now() + timeout;
    while (!done()) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return true;
  }

  std::string conninfo_;
  std::string queue_;
  AmqpUrl amqp_;
  std::unique_ptr<PgConnection> test_;
};

// PgProducer writes kMessages payments from many threads; two consumers,
// each with its own session and broker connections, share one inbox and
// read the same queue, while kCopied payments are published twice more. Each
// payment is booked exactly once, every copy answered as a duplicate, none
// dead-lettered, every outbox row closed SENT.
TEST_F(PgConsumerTest, TwoConsumersOnOneInboxBookEachPaymentOnce) {
  Process one = StartConsumer("consumer-1");
  Process two = StartConsumer("consumer-2");
  ASSERT_NE(one.consumer, nullptr);
  ASSERT_NE(two.consumer, nullptr);
  PgProducer::Options options;
  options.amqp = amqp_;
  options.queue = queue_;
  options.signing = Signing::Unsigned();
  options.retry.base_delay = absl::Seconds(1);
  options.recovery_in_process = false;  // the copies are the test's own
  auto producer = PgProducer::Start(conninfo_, options);
  ASSERT_OK(producer);

  Handoff handoff;
  std::thread copier([&] { PublishCopies(handoff, kCopied); });
  std::atomic<int> failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string id = absl::StrCat("pay-", t, "-", i);
        auto written =
            (*producer)->Write(MessageSpec::Of("payment", id, id), [id](PgConnection& conn) {
              return conn.Query("INSERT INTO payments (id) VALUES ($1)", {id}).status();
            });
        if (!written.ok()) {
          ++failed;
          ADD_FAILURE() << id << ": " << written.status();
        } else if (i < kCopiedPerThread) {
          handoff.Put(*written);
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  copier.join();
  ASSERT_EQ(failed.load(), 0);

  auto handled = [&] {
    return one.consumer->booked() + two.consumer->booked() + one.consumer->duplicates() +
           two.consumer->duplicates();
  };
  EXPECT_TRUE(Eventually([&] { return handled() >= kMessages + 2 * kCopied; }, absl::Minutes(2)))
      << handled();
  EXPECT_OK((*producer)->WaitUntilClosed(absl::Now() + absl::Minutes(2)));
  EXPECT_EQ(PgCount(*test_, "SELECT count(*) FROM outbox WHERE status = 'SENT'"), kMessages);
  EXPECT_EQ(PgCount(*test_, "SELECT count(*) FROM outbox"), kMessages);
  EXPECT_EQ(one.consumer->booked() + two.consumer->booked(), kMessages);
  EXPECT_GE(one.consumer->duplicates() + two.consumer->duplicates(), 2 * kCopied);
  EXPECT_EQ(one.consumer->dead_lettered() + two.consumer->dead_lettered(), 0);
  EXPECT_EQ(PgCount(*test_, "SELECT count(*) FROM booked"), kMessages);
  EXPECT_EQ(PgCount(*test_, "SELECT count(*) FROM inbox"), kMessages);
  // Every inbox row names the booking its payment made.
  EXPECT_EQ(PgCount(*test_,
                    "SELECT count(*) FROM inbox i JOIN booked b ON b.payment_id = i.biz_key "
                    "AND b.reference = i.reference"),
            kMessages);
  printf("consumer-1: %lld booked, %lld duplicates; consumer-2: %lld booked, %lld duplicates\n",
         static_cast<long long>(one.consumer->booked()),
         static_cast<long long>(one.consumer->duplicates()),
         static_cast<long long>(two.consumer->booked()),
         static_cast<long long>(two.consumer->duplicates()));
  (*producer)->Stop();
  one.consumer->Stop();
  two.consumer->Stop();
}

}  // namespace
}  // namespace outbox::testing
