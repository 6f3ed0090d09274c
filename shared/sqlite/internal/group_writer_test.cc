// The group writer (group_writer.h) on a real SQLite file: writes of many
// callers in one transaction, each under its own savepoint; acknowledgements
// in the same commit; backpressure (and WriteHold, its decisions, which
// PostgreSQL's writer shares); Stop; the relay fed after the commit.
#include "shared/sqlite/internal/group_writer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shared/base/internal/mutex.h"
#include "shared/observability/log.h"
#include "shared/outbox/internal/write_queue.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/sqlite/schema.h"
#include "shared/testing/fakes.h"
#include "shared/testing/manual_clock.h"
#include "shared/testing/stamp_handler.h"
#include "shared/testing/status_matchers.h"
#include "shared/testing/temp_dir.h"

namespace outbox {
namespace {

using ::outbox::testing::ManualClock;
using ::outbox::testing::RecordingRelay;
using ::outbox::testing::StatusIs;
using ::testing::HasSubstr;

// The producer's file: its business table, one with a deferred reference
// (a write can make the group's COMMIT itself fail), and the outbox tables.
const DbSchema& LoansSchema() {
  static const DbSchema* const schema =
      new DbSchema{{{"loans and the outbox", [](SQLite::Database& db) {
                       db.exec("CREATE TABLE loans (id TEXT PRIMARY KEY)");
                       db.exec(
                           "CREATE TABLE returns (loan TEXT REFERENCES loans (id) DEFERRABLE "
                           "INITIALLY DEFERRED)");
                       CreateOutboxTable(db);
                     }}}};
  return *schema;
}

MessageSpec Spec(const std::string& id) {
  MessageSpec spec;
  spec.message_id = "m-" + id;
  spec.biz_type = "loan";
  spec.biz_key = id;
  spec.topic = "loans";
  spec.reply_to = "loans.replies";
  spec.message_type = "LoanOpened";
  spec.payload = id;
  return spec;
}

// The business write of loan `id`.
BusinessWrite Loan(const std::string& id) {
  return [id](SQLite::Database& db) {
    SQLite::Statement insert(db, "INSERT INTO loans VALUES (?)");
    insert.bind(1, id);
    insert.exec();
    return absl::OkStatus();
  };
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

class GroupWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    auto file = OpenSqliteFile(dir_.path() + "/loans.db", {}, &LoansSchema());
    ASSERT_OK(file);
    file_ = *std::move(file);
    outbox_ = std::make_unique<SqliteOutbox>(*file_, clock_, retry_);
  }

  std::unique_ptr<GroupWriter> MakeWriter(GroupWriterOptions options = {}) {
    return std::make_unique<GroupWriter>(*file_, *outbox_, relay_, clock_, metrics_,
                                         std::move(options));
  }
  int64_t Rows(const std::string& table) { return testing::CountRows(*file_, table); }

  // A write that holds the writer thread inside its group until
  // Release(): whatever is queued meanwhile forms the next group.
  void HoldTheWriter(GroupWriter& writer) {
    writer.WriteAsync(
        Spec("held"),
        [this](SQLite::Database&) {
          held_.Notify();
          release_.WaitForNotification();
          return absl::OkStatus();
        },
        [](absl::StatusOr<OutboxMessage>) {});
    held_.WaitForNotification();
  }
  void Release() { release_.Notify(); }

  TempDir dir_{"group_writer_test"};
  ManualClock clock_{1'700'000'000'000};
  RetryPolicy retry_;
  MetricsRegistry metrics_;
  RecordingRelay relay_;
  std::unique_ptr<SqliteFile> file_;
  std::unique_ptr<SqliteOutbox> outbox_;
  Notification held_;
  Notification release_;
};

TEST_F(GroupWriterTest, ManyCallersCommitInOneTransactionPerGroup) {
  GroupWriterOptions options;
  options.max_batch = 16;
  auto writer = MakeWriter(options);
  writer->Start();
  HoldTheWriter(*writer);
  const int64_t groups = writer->groups_committed();
  constexpr int kThreads = 8;
  constexpr int kEach = 8;
  std::atomic<int> ok{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < kThreads; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const std::string id = absl::StrCat(t, "-", i);
        writer->WriteAsync(Spec(id), Loan(id), [&](absl::StatusOr<OutboxMessage> row) {
          if (row.ok()) ++ok;
        });
      }
    });
  }
  for (std::thread& c : callers) c.join();  // every write queued behind the held one
  Release();
  writer->Stop();
  EXPECT_EQ(ok.load(), kThreads * kEach);
  EXPECT_EQ(Rows("loans"), kThreads * kEach);  // the held write has none
  EXPECT_EQ(relay_.ids().size(), static_cast<size_t>(kThreads * kEach + 1));
  EXPECT_EQ(writer->written(), kThreads * kEach + 1);
  // The held write's group, then 64 writes in groups of max_batch.
  EXPECT_EQ(writer->groups_committed() - groups, 1 + kThreads * kEach / 16);
}

TEST_F(GroupWriterTest, BlockingCallersFromManyThreadsAreCommittedAndPublished) {
  auto writer = MakeWriter();
  writer->Start();
  constexpr int kThreads = 8;
  constexpr int kEach = 25;
  std::vector<std::thread> callers;
  std::atomic<int> ok{0};
  for (int t = 0; t < kThreads; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        const std::string id = absl::StrCat(t, "-", i);
        absl::StatusOr<OutboxMessage> row = writer->Write(Spec(id), Loan(id));
        if (!row.ok()) continue;
        ++ok;
        EXPECT_EQ(row->message_id, "m-" + id);
        EXPECT_GT(row->id, 0);
        EXPECT_EQ(row->created_at, clock_.NowMillis());
        EXPECT_EQ(row->next_retry_at,
                  clock_.NowMillis() + absl::ToInt64Milliseconds(retry_.DelayAfter(1)));
      }
    });
  }
  for (std::thread& c : callers) c.join();
  writer->Stop();
  EXPECT_EQ(ok.load(), kThreads * kEach);
  EXPECT_EQ(Rows("loans"), kThreads * kEach);
  EXPECT_EQ(Rows("outbox"), kThreads * kEach);
  const std::vector<std::string> ids = relay_.ids();
  EXPECT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(),
            static_cast<size_t>(kThreads * kEach));
  // Handed over with the group's time stamp, from which the first retry counts.
  for (absl::Time at : relay_.written_at()) EXPECT_EQ(at, clock_.Now());
}

// One group of six writes, three of which fail each in its own way: those
// three roll back alone; the others commit and go to the relay.
TEST_F(GroupWriterTest, AFailingWriteFailsAloneAndTheRestOfTheGroupCommits) {
  auto writer = MakeWriter();
  writer->Start();
  ASSERT_OK(writer->Write(Spec("taken"), Loan("taken")));
  HoldTheWriter(*writer);
  const int64_t groups = writer->groups_committed();
  std::vector<absl::StatusOr<OutboxMessage>> outcomes(6, absl::UnknownError("no outcome"));
  auto into = [&](int i) {
    return [&outcomes, i](absl::StatusOr<OutboxMessage> row) { outcomes[i] = std::move(row); };
  };
  writer->WriteAsync(Spec("a"), Loan("a"), into(0));
  // Writes its row, then refuses: the row is rolled back, the error is its own.
  writer->WriteAsync(
      Spec("b"),
      [](SQLite::Database& db) {
        Loan("b")(db).IgnoreError();
        return absl::FailedPreconditionError("book b is out");
      },
      into(1));
  writer->WriteAsync(Spec("c"), Loan("taken"), into(2));  // the loan's key is taken
  writer->WriteAsync(
      Spec("d"),
      [](SQLite::Database& db) -> absl::Status {
        Loan("d")(db).IgnoreError();
        throw std::runtime_error("the adopter's bug");
      },
      into(3));
  writer->WriteAsync(Spec("taken"), Loan("e"), into(4));  // the message id is taken
  writer->WriteAsync(Spec("f"), Loan("f"), into(5));
  Release();
  writer->Stop();

  EXPECT_EQ(writer->groups_committed() - groups, 2) << "the held write's group, then one";
  ASSERT_OK(outcomes[0]);
  EXPECT_THAT(outcomes[1].status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("book b is out")));
  EXPECT_THAT(outcomes[2].status(), StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_FALSE(IsOutboxRowExists(outcomes[2].status()));  // the adopter's own key
  EXPECT_THAT(outcomes[3].status(),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("the adopter's bug")));
  EXPECT_THAT(outcomes[4].status(), StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_TRUE(IsOutboxRowExists(outcomes[4].status()));
  ASSERT_OK(outcomes[5]);
  EXPECT_EQ(Rows("loans"), 3);   // taken, a, f
  EXPECT_EQ(Rows("outbox"), 4);  // and held
  EXPECT_EQ(relay_.ids(), (std::vector<std::string>{"m-taken", "m-held", "m-a", "m-f"}));
  EXPECT_EQ(writer->written(), 4);
}

// A group whose transaction does not commit: each write gets its error,
// nothing reaches the relay, and the next group commits.
TEST_F(GroupWriterTest, AGroupThatCannotCommitFailsEachOfItsWrites) {
  ASSERT_OK(file_->WithWriter("foreign keys on", [](SQLite::Database& db) {
    db.exec("PRAGMA foreign_keys = ON");
    return absl::OkStatus();
  }));
  auto writer = MakeWriter();
  writer->Start();
  HoldTheWriter(*writer);
  std::vector<absl::StatusOr<OutboxMessage>> outcomes(2, absl::UnknownError("no outcome"));
  Notification answered;
  writer->WriteAsync(Spec("a"), Loan("a"),
                     [&](absl::StatusOr<OutboxMessage> row) { outcomes[0] = std::move(row); });
  // A return of no loan: the reference is checked at COMMIT.
  writer->WriteAsync(
      Spec("r"),
      [](SQLite::Database& db) {
        db.exec("INSERT INTO returns VALUES ('no such loan')");
        return absl::OkStatus();
      },
      [&](absl::StatusOr<OutboxMessage> row) {
        outcomes[1] = std::move(row);
        answered.Notify();
      });
  Release();
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_THAT(outcomes[0].status(), StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(outcomes[1].status(), StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_NE(metrics_.Render().find("outbox_store_write_failures_total{write=\"commit_group\"} 1"),
            std::string::npos);
  ASSERT_OK(writer->Write(Spec("b"), Loan("b")));
  writer->Stop();
  EXPECT_EQ(relay_.ids(), (std::vector<std::string>{"m-held", "m-b"}));
  EXPECT_EQ(Rows("loans"), 1);
}

TEST_F(GroupWriterTest, WriteAsyncCompletesOnceOnTheWriterThreadAfterTheCommit) {
  auto writer = MakeWriter();
  writer->Start();
  constexpr int kCalls = 40;
  Mutex mu;
  std::vector<int> calls(kCalls, 0);
  std::set<std::thread::id> threads;
  bool committed_before_done = true;
  int answered = 0;
  for (int i = 0; i < kCalls; ++i) {
    const std::string id = std::to_string(i);
    // Every fifth write fails in its business part.
    BusinessWrite business = Loan(id);
    if (i % 5 == 0) business = [](SQLite::Database&) { return absl::AbortedError("no"); };
    writer->WriteAsync(Spec(id), business, [&, i](absl::StatusOr<OutboxMessage> row) {
      // A committed row is in the file when its caller hears of it.
      const bool stored = !row.ok() || outbox_->Get(row->message_id).ok();
      MutexLock lock(&mu);
      ++calls[i];
      ++answered;
      committed_before_done &= stored;
      committed_before_done &= row.ok() == (i % 5 != 0);
      threads.insert(std::this_thread::get_id());
    });
  }
  {
    MutexLock lock(&mu);
    auto all = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu) { return answered == kCalls; };
    mu.Await(absl::Condition(&all));
  }
  writer->Stop();
  MutexLock lock(&mu);
  EXPECT_EQ(answered, kCalls);
  for (int i = 0; i < kCalls; ++i) EXPECT_EQ(calls[i], 1) << "write " << i;
  EXPECT_TRUE(committed_before_done);
  // All on the writer's own thread, none on the caller's.
  EXPECT_EQ(threads.size(), 1u);
  EXPECT_EQ(threads.count(std::this_thread::get_id()), 0u);
  EXPECT_EQ(relay_.ids().size(), static_cast<size_t>(kCalls - kCalls / 5));
}

TEST_F(GroupWriterTest, StopCommitsWhatIsQueuedThenRefuses) {
  auto writer = MakeWriter();
  writer->Start();
  HoldTheWriter(*writer);
  std::atomic<int> ok{0};
  auto count = [&ok](absl::StatusOr<OutboxMessage> row) {
    if (row.ok()) ++ok;
  };
  for (int i = 0; i < 20; ++i) {
    const std::string id = std::to_string(i);
    writer->WriteAsync(Spec(id), Loan(id), count);
  }
  std::thread stopper([&] { writer->Stop(); });
  // Once stopping, a write is refused at once, on its caller's thread; the
  // ones queued before that are committed.
  int late = 0;
  const bool refused = Eventually([&] {
    const std::string id = absl::StrCat("late-", late++);
    auto refused = std::make_shared<bool>(false);  // a queued probe answers later
    writer->WriteAsync(Spec(id), Loan(id), [refused, count](absl::StatusOr<OutboxMessage> row) {
      if (absl::IsUnavailable(row.status())) {
        *refused = true;  // at once, on this thread
      } else {
        count(std::move(row));
      }
    });
    return *refused;
  });
  Release();
  stopper.join();
  ASSERT_TRUE(refused);
  const int queued = 20 + late - 1;  // all but the last probe
  EXPECT_EQ(ok.load(), queued);
  EXPECT_EQ(Rows("loans"), queued);
  EXPECT_EQ(relay_.ids().size(), static_cast<size_t>(queued + 1));  // and the held write
  EXPECT_THAT(writer->RecordAcks({"m-1"}).status(), StatusIs(absl::StatusCode::kUnavailable));
}

TEST_F(GroupWriterTest, StopWithoutStartCommitsOnTheCallersThread) {
  auto writer = MakeWriter();
  std::atomic<int> ok{0};
  for (int i = 0; i < 3; ++i) {
    const std::string id = std::to_string(i);
    writer->WriteAsync(Spec(id), Loan(id), [&](absl::StatusOr<OutboxMessage> row) {
      if (row.ok()) ++ok;
    });
  }
  writer->Stop();
  EXPECT_EQ(ok.load(), 3);
  EXPECT_EQ(relay_.ids().size(), 3u);
  EXPECT_EQ(writer->groups_committed(), 1);
}

TEST_F(GroupWriterTest, AcknowledgementsRideTheGroupCommit) {
  auto writer = MakeWriter();
  writer->Start();
  auto a = writer->Write(Spec("a"), Loan("a"));
  auto b = writer->Write(Spec("b"), Loan("b"));
  ASSERT_OK(a);
  ASSERT_OK(b);
  clock_.Advance(absl::Milliseconds(1500));
  auto marked = writer->RecordAcks({a->message_id, "unknown"});
  ASSERT_OK(marked);
  EXPECT_EQ(marked->closed, 1);
  ASSERT_OK(writer->RecordPublishFailure({b->message_id}, "nack"));
  writer->Stop();
  auto row = outbox_->Get(a->message_id);
  ASSERT_OK(row);
  EXPECT_EQ(row->status, OutboxStatus::kSent);
  EXPECT_EQ(row->sent_at, clock_.NowMillis());
  EXPECT_EQ(outbox_->Get(b->message_id)->last_error, "nack");
  // Its commit to SENT, for the ack listener's histogram.
  EXPECT_EQ(marked->create_to_sent_ms, (std::vector<int64_t>{1500}));
}

// With a linger, acknowledgements that find no write queued wait for the
// next one and share its commit: one transaction (one fsync) for both.
TEST_F(GroupWriterTest, AcknowledgementsLingerForTheNextWritesCommit) {
  GroupWriterOptions options;
  options.ack_linger = absl::Seconds(30);  // the write below ends it, not the time
  auto writer = MakeWriter(options);
  writer->Start();
  auto a = writer->Write(Spec("a"), Loan("a"));
  ASSERT_OK(a);
  const int64_t groups = writer->groups_committed();
  absl::StatusOr<AckTally> marked;
  std::thread acks([&] { marked = writer->RecordAcks({a->message_id}); });
  ASSERT_TRUE(Eventually([&] { return writer->ack_lingers() == 1; }));
  ASSERT_OK(writer->Write(Spec("b"), Loan("b")));
  acks.join();
  ASSERT_OK(marked);
  EXPECT_EQ(marked->closed, 1);
  EXPECT_EQ(writer->groups_committed(), groups + 1) << "the ack and the write in one commit";
  // Stopping ends a linger at once: the acknowledgement commits alone.
  std::thread last([&] { marked = writer->RecordAcks({"m-b"}); });
  ASSERT_TRUE(Eventually([&] { return writer->ack_lingers() == 2; }));
  writer->Stop();
  last.join();
  ASSERT_OK(marked);
  EXPECT_EQ(outbox_->Get("m-b")->status, OutboxStatus::kSent);
}

TEST_F(GroupWriterTest, WhileTheConsumerLagsNewWritesWaitForItsAcks) {
  GroupWriterOptions options;
  options.max_unsent = 2;
  options.max_hold = absl::Minutes(1);  // only acks end this hold
  options.ack_linger = absl::ZeroDuration();
  auto writer = MakeWriter(options);
  writer->Start();
  for (const char* id : {"0", "1", "2"}) ASSERT_OK(writer->Write(Spec(id), Loan(id)));
  EXPECT_EQ(writer->holds(), 0);  // no acks yet: nothing is held for them
  // Acks flow, and 2 rows are still SENDING: the consumer lags.
  ASSERT_OK(writer->RecordAcks({"m-0"}));
  Notification written;
  writer->WriteAsync(Spec("3"), Loan("3"), [&](absl::StatusOr<OutboxMessage> row) {
    EXPECT_OK(row);
    written.Notify();
  });
  ASSERT_TRUE(Eventually([&] { return writer->holds() == 1; }));
  EXPECT_FALSE(written.HasBeenNotified());
  // The next ack commits on its own; the backlog is under the bound again,
  // so the held write goes into the next group.
  ASSERT_OK(writer->RecordAcks({"m-1"}));
  ASSERT_TRUE(written.WaitForNotificationWithTimeout(absl::Seconds(30)));
  writer->Stop();
  EXPECT_EQ(relay_.ids().size(), 4u);
}

TEST_F(GroupWriterTest, WithoutAcksNothingIsHeld) {
  // The consumer away: the backlog grows, callers are not held for it.
  GroupWriterOptions options;
  options.max_unsent = 1;
  options.max_hold = absl::Minutes(1);
  auto writer = MakeWriter(options);
  writer->Start();
  for (int i = 0; i < 5; ++i) {
    const std::string id = std::to_string(i);
    ASSERT_OK(writer->Write(Spec(id), Loan(id)));
  }
  writer->Stop();
  EXPECT_EQ(writer->holds(), 0);
  EXPECT_EQ(relay_.ids().size(), 5u);
}

TEST_F(GroupWriterTest, TheWrittenCounterTakesTheServicesName) {
  GroupWriterOptions options;
  options.written_metric = "outbox_loans_opened_total";
  options.written_help = "loans opened";
  auto writer = MakeWriter(options);
  writer->Start();
  ASSERT_OK(writer->Write(Spec("a"), Loan("a")));
  writer->Stop();
  const std::string text = metrics_.Render();
  EXPECT_NE(text.find("\noutbox_loans_opened_total 1\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("outbox_messages_written_total"), std::string::npos) << text;
}

// WriteHold (write_queue.h), the backpressure both group writers take: its
// decisions after each group, with the count in the test's hands.
class WriteHoldTest : public ::testing::Test {
 protected:
  WriteHold Hold(int64_t max_unsent) {
    return WriteHold(max_unsent, absl::Milliseconds(20), clock_, [this](int64_t limit) {
      ++counts_;
      EXPECT_EQ(limit, 2);
      return sending_;
    });
  }

  ManualClock clock_;
  absl::StatusOr<int64_t> sending_ = 2;
  int counts_ = 0;
};

TEST_F(WriteHoldTest, HoldsWhileAcksFlowAndTheBacklogIsAtTheBound) {
  WriteHold hold = Hold(2);
  hold.After(/*wrote=*/true, WriteHold::kNoAck);
  EXPECT_EQ(hold.until(), absl::InfinitePast()) << "no acks yet";
  EXPECT_EQ(counts_, 0) << "nothing counted without acks";
  const int64_t acked = clock_.NowMillis();
  hold.After(true, acked);
  const absl::Time until = clock_.Now() + absl::Milliseconds(20);
  EXPECT_EQ(hold.until(), until);
  // Acknowledgements during the hold do not extend it...
  clock_.Advance(absl::Milliseconds(5));
  hold.After(/*wrote=*/false, clock_.NowMillis());
  EXPECT_EQ(hold.until(), until);
  // ...a group of new writes starts the next one.
  hold.After(/*wrote=*/true, clock_.NowMillis());
  EXPECT_EQ(hold.until(), clock_.Now() + absl::Milliseconds(20));
  // Under the bound: no hold.
  sending_ = 1;
  hold.After(true, clock_.NowMillis());
  EXPECT_EQ(hold.until(), absl::InfinitePast());
  // The last ack over a second ago: the consumer is away, nothing counted.
  sending_ = 2;
  const int counted = counts_;
  clock_.Advance(absl::Milliseconds(1001));
  hold.After(true, acked);
  EXPECT_EQ(hold.until(), absl::InfinitePast());
  EXPECT_EQ(counts_, counted);
}

TEST_F(WriteHoldTest, MaxUnsentZeroNeverCounts) {
  WriteHold hold = Hold(0);
  hold.After(true, clock_.NowMillis());
  EXPECT_EQ(hold.until(), absl::InfinitePast());
  EXPECT_EQ(counts_, 0);
}

TEST_F(WriteHoldTest, ACountThatFailsHoldsNothingAndIsLoggedOnceAMinute) {
  Mutex mu;
  int logged = 0;
  SetLogSink([&](const LogRecord& r) {
    MutexLock lock(&mu);
    if (r.event == "unsent_count_failed") ++logged;
  });
  WriteHold hold = Hold(2);
  sending_ = absl::UnavailableError("the reader is gone");
  for (int i = 0; i < 3; ++i) {
    hold.After(true, clock_.NowMillis());
    EXPECT_EQ(hold.until(), absl::InfinitePast());
    clock_.Advance(absl::Seconds(1));
  }
  clock_.Advance(absl::Minutes(1));
  hold.After(true, clock_.NowMillis());
  SetLogSink(nullptr);
  EXPECT_EQ(counts_, 4);
  MutexLock lock(&mu);
  EXPECT_EQ(logged, 2);
}

TEST(GroupWriterOptionsTest, Validate) {
  EXPECT_OK(GroupWriterOptions{}.Validate());
  GroupWriterOptions o;
  o.max_batch = 0;
  EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_batch")));
  o = {};
  o.max_unsent = -1;
  EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_unsent")));
  o = {};
  o.max_hold = absl::Milliseconds(-1);
  EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_hold")));
  o = {};
  o.ack_linger = absl::Milliseconds(-1);
  EXPECT_THAT(o.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ack_linger")));
}

}  // namespace
}  // namespace outbox
