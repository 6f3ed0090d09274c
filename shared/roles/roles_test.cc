// The roles' entry points (producer.h, consumer.h, recovery.h) over the fake
// broker and real SQLite files, with the signing and the reply format they
// share (shared/outbox/signing.h, reply_format.h).
#include <sys/stat.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <SQLiteCpp/SQLiteCpp.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "shared/base/internal/mutex.h"
#include "shared/observability/log.h"
#include "shared/outbox/internal/reply_format.h"
#include "shared/outbox/signing.h"
#include "shared/roles/consumer.h"
#include "shared/roles/producer.h"
#include "shared/roles/recovery.h"
#include "shared/sqlite/inbox.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/sqlite/schema.h"
#include "shared/testing/fakes.h"
#include "shared/testing/manual_clock.h"
#include "shared/testing/stamp_handler.h"
#include "shared/testing/status_matchers.h"
#include "shared/testing/temp_dir.h"

namespace outbox {
namespace {

using ::outbox::testing::FakeConsumer;
using ::outbox::testing::FakePublisher;
using ::outbox::testing::IsOk;
using ::outbox::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::SizeIs;

constexpr char kQueue[] = "orders";

MessageKeys Keys(const std::string& id = "k1") {
  return *MessageKeys::Parse(id + " 0123456789abcdef0123456789abcdef-" + id);
}

// The producer's file: its own table and the outbox tables.
const DbSchema& OrdersSchema() {
  static const DbSchema* const schema =
      new DbSchema{{{"orders and the outbox", [](SQLite::Database& db) {
                       db.exec("CREATE TABLE orders (order_id TEXT PRIMARY KEY)");
                       CreateOutboxTable(db);
                     }}}};
  return *schema;
}

// What the broker hands the consumer for a message the producer published.
Delivery Delivered(const OutgoingMessage& m) {
  return testing::DeliveryOf(m);
}

// A consumer that writes only Decode and Apply: the library answers.
class Stamps final : public SqliteMessageHandler<testing::Stamp> {
 public:
  using SqliteMessageHandler::SqliteMessageHandler;
  absl::StatusOr<testing::Stamp> Decode(const Delivery& d) override {
    if (d.body.empty()) return absl::InvalidArgumentError("empty");
    return testing::Stamp{d.message_id, d.body, 1};
  }
  std::string BusinessKey(const testing::Stamp& s) override { return s.key; }
  absl::StatusOr<std::string> Apply(SQLite::Database& tx, const testing::Stamp& s) override {
    SQLite::Statement insert(tx, "INSERT INTO stamps (key, count, reference) VALUES (?, 1, ?)");
    insert.bind(1, s.key);
    insert.bind(2, "ref-" + s.key);
    insert.exec();
    return "ref-" + s.key;
  }
};

// --- Signing

TEST(SigningTest, NotChosenIsRefusedNamingTheRole) {
  Signing none;
  EXPECT_THAT(none.Required("Consumer"),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("Consumer")));
  EXPECT_EQ(none.keys(), nullptr);
  EXPECT_EQ(none.Describe(), "not chosen");
}

TEST(SigningTest, UnsignedIsChosenByName) {
  Signing s = Signing::Unsigned();
  EXPECT_OK(s.Required("Consumer"));
  EXPECT_FALSE(s.signs());
  EXPECT_EQ(s.keys(), nullptr);
  EXPECT_EQ(s.Describe(), "unsigned");
}

TEST(SigningTest, CopiesShareOneKeySet) {
  Signing s = Signing::With(Keys());
  Signing copy = s;
  EXPECT_OK(copy.Required("Producer"));
  EXPECT_TRUE(copy.signs());
  EXPECT_EQ(copy.keys(), s.keys());
  EXPECT_EQ(copy.Describe(), "key k1");
}

TEST(SigningTest, FromKeyFile) {
  TempDir dir;
  EXPECT_THAT(Signing::FromKeyFile(dir.path() + "/none").status(),
              StatusIs(absl::StatusCode::kNotFound));
  std::ofstream(dir.path() + "/bad") << "k1 short\n";
  EXPECT_THAT(Signing::FromKeyFile(dir.path() + "/bad").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("/bad")));
  std::ofstream(dir.path() + "/keys") << "# rotated\nk2 0123456789abcdef0123456789abcdef-2\n";
  chmod((dir.path() + "/keys").c_str(), 0600);
  std::vector<std::string> warnings;
  SetLogSink([&](const LogRecord& r) {
    if (r.level == LogLevel::kWarning) warnings.emplace_back(r.event);
  });
  absl::StatusOr<Signing> s = Signing::FromKeyFile(dir.path() + "/keys");
  ASSERT_OK(s);
  EXPECT_EQ(s->Describe(), "key k2");
  EXPECT_THAT(warnings, ::testing::IsEmpty());
  chmod((dir.path() + "/keys").c_str(), 0644);  // every user may read the secrets
  EXPECT_OK(Signing::FromKeyFile(dir.path() + "/keys"));
  SetLogSink(nullptr);
  EXPECT_THAT(warnings, ::testing::ElementsAre("message_keys_file_too_open"));
}

// --- The reply format

TEST(ReplyFormatTest, EachOutcomeRoundTrips) {
  Applied applied;
  applied.reference = "ship-1";
  Applied duplicate;
  duplicate.duplicate = true;
  Applied rejected;
  rejected.rejected_reason = "amount over the limit\nsee the rules";

  OutgoingMessage reply = DefaultReply("orders.replies", "m-1", "o-1", applied);
  EXPECT_EQ(reply.topic, "orders.replies");
  EXPECT_EQ(reply.type, kReplyType);
  auto acks = DecodeDefaultReply(Delivered(reply));
  ASSERT_OK(acks);
  ASSERT_THAT(*acks, SizeIs(1));
  EXPECT_EQ((*acks)[0].message_id, "m-1");
  EXPECT_EQ((*acks)[0].biz_key, "o-1");
  EXPECT_FALSE((*acks)[0].duplicate);
  EXPECT_EQ((*acks)[0].rejected_reason, "");

  acks = DecodeDefaultReply(Delivered(DefaultReply("r", "m-2", "", duplicate)));
  ASSERT_OK(acks);
  EXPECT_TRUE((*acks)[0].duplicate);

  acks = DecodeDefaultReply(Delivered(DefaultReply("r", "m-3", "o-3", rejected)));
  ASSERT_OK(acks);
  EXPECT_EQ((*acks)[0].rejected_reason, "amount over the limit\nsee the rules");
}

TEST(ReplyFormatTest, AnythingElseIsInvalid) {
  Delivery other;
  other.type = "OrderShipped";
  other.body = "m-1";
  EXPECT_THAT(DecodeDefaultReply(other).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  Delivery short_body;
  short_body.type = kReplyType;
  short_body.body = "m-1\napplied";
  EXPECT_THAT(DecodeDefaultReply(short_body).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  Delivery unknown = Delivered(DefaultReply("r", "m-1", "", Applied{}));
  unknown.body = "m-1\nmaybe\n\n";
  EXPECT_THAT(DecodeDefaultReply(unknown).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("maybe")));
}

// --- The roles refuse to start without a choice of signing

class RolesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    auto orders = OpenSqliteFile(dir_.path() + "/orders.db", {}, &OrdersSchema());
    ASSERT_OK(orders);
    orders_ = *std::move(orders);
    stamps_ = testing::OpenStampFile(dir_.path() + "/stamps.db");
    ASSERT_NE(stamps_, nullptr);
    handler_ = std::make_unique<Stamps>(*stamps_, clock_);
  }

  // A producer over fakes; `publisher` and `replies` point at them.
  absl::StatusOr<std::unique_ptr<Producer>> MakeProducer(Signing signing) {
    Producer::Options options;
    options.queue = kQueue;
    options.signing = std::move(signing);
    options.clock = &clock_;
    auto p = std::make_unique<FakePublisher>();
    auto r = std::make_unique<FakeConsumer>();
    publisher_ = p.get();
    producer_replies_ = r.get();
    return Producer::Create(*orders_, options, std::move(p), std::move(r));
  }
  absl::StatusOr<std::unique_ptr<Consumer>> MakeConsumer(Signing signing) {
    Consumer::Options options;
    options.queue = kQueue;
    options.signing = std::move(signing);
    options.clock = &clock_;
    auto d = std::make_unique<FakeConsumer>();
    auto r = std::make_unique<FakePublisher>();
    deliveries_ = d.get();
    consumer_replies_ = r.get();
    return Consumer::Create(*handler_, options, std::move(d), std::move(r));
  }
  absl::StatusOr<std::string> PlaceOrder(Producer& producer, const std::string& order_id) {
    MessageSpec spec;
    spec.message_id = "m-" + order_id;
    spec.biz_type = "order";
    spec.biz_key = order_id;
    spec.message_type = "OrderPlaced";
    spec.payload = order_id;
    return producer.Write(spec, [&](SQLite::Database& db) {
      SQLite::Statement insert(db, "INSERT INTO orders VALUES (?)");
      insert.bind(1, order_id);
      insert.exec();
      return absl::OkStatus();
    });
  }
  // Steps the consumer until its fake broker has settled every delivery.
  void DrainConsumer(Consumer& consumer) {
    for (int i = 0; i < 10 && deliveries_->ready() + Unsettled() > 0; ++i) consumer.Step();
  }
  size_t Unsettled() const {
    return pushed_ - deliveries_->acked.size() - deliveries_->rejected.size() -
           deliveries_->requeued.size();
  }
  void Push(Delivery d) {
    deliveries_->Push(std::move(d));
    ++pushed_;
  }

  TempDir dir_;
  testing::ManualClock clock_;
  std::unique_ptr<SqliteFile> orders_;
  std::unique_ptr<SqliteFile> stamps_;
  std::unique_ptr<Stamps> handler_;
  FakePublisher* publisher_ = nullptr;
  FakeConsumer* producer_replies_ = nullptr;
  FakeConsumer* deliveries_ = nullptr;
  FakePublisher* consumer_replies_ = nullptr;
  size_t pushed_ = 0;
};

TEST_F(RolesTest, EachRoleRefusesToStartWithoutAChoiceOfSigning) {
  EXPECT_THAT(MakeProducer(Signing()).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("Producer")));
  EXPECT_THAT(MakeConsumer(Signing()).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("Consumer")));
  Recovery::Options recovery;
  recovery.queue = kQueue;
  recovery.recovery.instance_id = "r1";
  EXPECT_THAT(Recovery::Start(recovery).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("Recovery")));
  // Before any file or connection: Start checks first.
  Producer::Options producer;
  producer.queue = kQueue;
  EXPECT_THAT(Producer::Start(*orders_, producer).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  Consumer::Options consumer;
  consumer.queue = kQueue;
  EXPECT_THAT(Consumer::Start(*handler_, consumer).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST_F(RolesTest, OptionsAreChecked) {
  Producer::Options producer;
  producer.signing = Signing::Unsigned();
  EXPECT_THAT(Producer::Start(*orders_, producer).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("queue")));
  producer.queue = kQueue;
  producer.reply_queue = kQueue;
  EXPECT_THAT(Producer::Start(*orders_, producer).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("reply_queue")));
  producer.reply_queue = "";
  producer.retry.max_attempts = 0;
  EXPECT_THAT(Producer::Start(*orders_, producer).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("retry")));
  Consumer::Options consumer;
  consumer.signing = Signing::Unsigned();
  EXPECT_THAT(Consumer::Start(*handler_, consumer).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("queue")));
  Recovery::Options recovery;
  recovery.signing = Signing::Unsigned();
  recovery.queue = kQueue;
  EXPECT_THAT(Recovery::Start(recovery).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("instance_id")));
  recovery.recovery.instance_id = "r1";
  EXPECT_THAT(Recovery::Start(recovery).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("options.db")));
  // A PostgreSQL database is StartPgRecovery's: refused as such, not looked
  // for as a file, and its password never echoed.
  recovery.producer_db.schema = &OrdersSchema();
  recovery.wait_for_db = absl::ZeroDuration();
  for (const char* db : {"postgresql://shop:s3cret@db.example/shop", "postgres://db/shop"}) {
    recovery.db = db;
    const absl::Status refused = Recovery::Start(recovery).status();
    EXPECT_THAT(refused, StatusIs(absl::StatusCode::kInvalidArgument,
                                  AllOf(HasSubstr("StartPgRecovery"), Not(HasSubstr("s3cret")))))
        << db;
  }
}

// One key set for the process: the producer signs, the consumer checks and
// signs its replies in the library's format, the ack listener checks and
// reads them, and the rows close.
TEST_F(RolesTest, ProducerAndConsumerShareOneKeySetAndTheReplyFormat) {
  const Signing signing = Signing::With(Keys());
  auto producer = MakeProducer(signing);
  ASSERT_OK(producer);
  auto consumer = MakeConsumer(signing);
  ASSERT_OK(consumer);
  EXPECT_EQ((*producer)->options().reply_queue, "orders.replies");
  EXPECT_EQ((*consumer)->options().reply_queue, "orders.replies");

  ASSERT_OK(PlaceOrder(**producer, "o-1"));
  ASSERT_OK(PlaceOrder(**producer, "o-2"));
  auto counts = (*producer)->CountRows();
  ASSERT_OK(counts);
  EXPECT_EQ(counts->sending, 2);
  (*producer)->RelayStep();
  ASSERT_THAT(publisher_->published, SizeIs(2));
  for (const OutgoingMessage& m : publisher_->published) {
    EXPECT_EQ(m.topic, kQueue);
    EXPECT_EQ(m.reply_to, "orders.replies");
    EXPECT_OK(signing.keys()->Verify(Delivered(m)));
    Push(Delivered(m));
  }
  Push(Delivered(publisher_->published[0]));  // a copy: answered as a duplicate

  DrainConsumer(**consumer);
  EXPECT_EQ((*consumer)->booked(), 2);
  EXPECT_EQ((*consumer)->duplicates(), 1);
  EXPECT_EQ(testing::CountRows(*stamps_, "stamps"), 2);
  ASSERT_THAT(consumer_replies_->published, SizeIs(3));
  for (const OutgoingMessage& reply : consumer_replies_->published) {
    EXPECT_EQ(reply.topic, "orders.replies");
    EXPECT_EQ(reply.type, kReplyType);
    EXPECT_OK(signing.keys()->Verify(Delivered(reply)));
    producer_replies_->Push(Delivered(reply));
  }

  (*producer)->AckStep();
  EXPECT_EQ((*producer)->acknowledged(), 2);
  EXPECT_EQ((*producer)->replies(), 3);
  EXPECT_EQ((*producer)->dead_lettered_replies(), 0);
  counts = (*producer)->WaitUntilClosed(absl::Now());
  ASSERT_OK(counts);
  EXPECT_EQ(counts->sending, 0);
  EXPECT_EQ(counts->sent, 2);
  auto row = (*producer)->Get("m-o-1");
  ASSERT_OK(row);
  EXPECT_EQ(row->status, OutboxStatus::kSent);
}

// The consumer prunes its handler's inbox after the retention, 30 days
// unless told otherwise; zero keeps every id.
TEST_F(RolesTest, TheConsumerPrunesProcessedIdsAfterTheRetention) {
  auto consumer = MakeConsumer(Signing::Unsigned());
  ASSERT_OK(consumer);
  EXPECT_EQ((*consumer)->options().inbox_retention, absl::Hours(720));
  Push(testing::StampDelivery("m-1", "o-1"));
  DrainConsumer(**consumer);
  ASSERT_EQ((*consumer)->booked(), 1);
  EXPECT_EQ(testing::CountRows(*stamps_, "inbox"), 1);

  auto pruned = [](Consumer& c) {
    absl::StatusOr<int64_t> n = c.PruneStep();
    EXPECT_OK(n);
    return n.ok() ? *n : -1;
  };
  clock_.Advance(absl::Hours(720));
  EXPECT_EQ(pruned(**consumer), 0);  // not older than the retention yet
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_EQ(pruned(**consumer), 1);
  EXPECT_EQ(testing::CountRows(*stamps_, "inbox"), 0);
  EXPECT_EQ(testing::CountRows(*stamps_, "stamps"), 1);  // the change itself stays

  Consumer::Options keep_all;
  keep_all.queue = kQueue;
  keep_all.signing = Signing::Unsigned();
  keep_all.clock = &clock_;
  keep_all.inbox_retention = absl::ZeroDuration();
  auto keeping = Consumer::Create(*handler_, keep_all, std::make_unique<FakeConsumer>(),
                                  std::make_unique<FakePublisher>());
  ASSERT_OK(keeping);
  ASSERT_OK(stamps_->Write([&](SQLite::Database& db) {
    Inbox(db).Record("m-old", "o-old", "ref", 0);
    return absl::OkStatus();
  }));
  EXPECT_EQ(pruned(**keeping), 0);
  EXPECT_EQ(testing::CountRows(*stamps_, "inbox"), 1);

  keep_all.inbox_retention = absl::Seconds(-1);
  EXPECT_THAT(Consumer::Create(*handler_, keep_all, std::make_unique<FakeConsumer>(),
                               std::make_unique<FakePublisher>())
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("inbox_retention")));
}

// An adopter names the consumer's counter of messages applied; unnamed, it
// is the library's, and the connections declare the queues alone.
TEST_F(RolesTest, TheConsumersCounterIsTheOneNamed) {
  Consumer::Options options;
  options.queue = kQueue;
  options.signing = Signing::Unsigned();
  options.clock = &clock_;
  MetricsRegistry library;
  options.metrics = &library;
  auto plain = Consumer::Create(*handler_, options, std::make_unique<FakeConsumer>(),
                                std::make_unique<FakePublisher>());
  ASSERT_OK(plain);
  EXPECT_NE(library.Render().find("outbox_consumer_booked_total 0"), std::string::npos);
  EXPECT_FALSE((*plain)->options().topology.has_value());
  EXPECT_FALSE((*plain)->options().reply_topology.has_value());
  EXPECT_EQ((*plain)->options().name, "consumer");

  MetricsRegistry named;
  options.metrics = &named;
  options.booked_metric = "shop_shipments_total";
  options.booked_help = "orders shipped";
  auto consumer = Consumer::Create(*handler_, options, std::make_unique<FakeConsumer>(),
                                   std::make_unique<FakePublisher>());
  ASSERT_OK(consumer);
  const std::string rendered = named.Render();
  EXPECT_NE(rendered.find("# HELP shop_shipments_total orders shipped"), std::string::npos);
  EXPECT_NE(rendered.find("shop_shipments_total 0"), std::string::npos);
  EXPECT_EQ(rendered.find("outbox_consumer_booked_total"), std::string::npos);
}

// The reply connection declares what options.reply_topology says, and that
// must hold the queue a message without a reply_to is answered on.
TEST_F(RolesTest, TheReplyTopologyDeclaresTheReplyQueue) {
  Consumer::Options options;
  options.queue = kQueue;
  options.signing = Signing::Unsigned();
  options.topology = Topology{};  // the queue's writer declares it
  options.reply_topology = Topology{{"orders.shard1.replies"}, "", "shop.replies"};
  EXPECT_THAT(Consumer::Create(*handler_, options, std::make_unique<FakeConsumer>(),
                               std::make_unique<FakePublisher>())
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("reply_topology")));
  options.reply_topology->queues.push_back("orders.replies");  // DefaultReplyQueue(kQueue)
  EXPECT_OK(Consumer::Create(*handler_, options, std::make_unique<FakeConsumer>(),
                             std::make_unique<FakePublisher>()));
  // Start hands both to its AMQP connections (no broker here: it starts and
  // stops; the services' e2e tests declare for real).
  options.amqp = *AmqpUrl::Parse("amqp://guest:guest@127.0.0.1:1/%2F");
  auto started = Consumer::Start(*handler_, options);
  ASSERT_OK(started);
  (*started)->Stop();
}

// Applies every message, in memory, and tells stderr when it answers: what
// a crash point's death test reads.
class AnswersOnStderr final : public ConsumerHandler {
 public:
  void Clear() override { added_ = 0; }
  absl::Status Add(const Delivery&) override {
    ++added_;
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<Applied>> ApplyBatch() override {
    return std::vector<Applied>(added_);
  }
  std::vector<Reply> Answer(const std::vector<Applied>& applied,
                            const std::vector<std::string>& reply_to) override {
    std::fprintf(stderr, "answered %zu\n", applied.size());
    std::vector<Reply> replies;
    for (size_t i = 0; i < applied.size(); ++i) {
      OutgoingMessage reply;
      reply.topic = reply_to[i];
      reply.message_id = absl::StrCat("reply-", i);
      replies.push_back({reply, {i}});
    }
    return replies;
  }

 private:
  size_t added_ = 0;
};

// In the death test's own process: arms `point` (OUTBOX_FAILPOINTS, read
// at the first crash point evaluated) and takes one message.
void StepWithArmed(const std::string& point) {
  setenv("OUTBOX_FAILPOINTS", (point + "=crash").c_str(), 1);
  AnswersOnStderr handler;
  Consumer::Options options;
  options.queue = kQueue;
  options.signing = Signing::Unsigned();
  options.after_apply_failpoint = "shop.after_apply";
  options.before_ack_failpoint = "shop.before_ack";
  auto deliveries = std::make_unique<FakeConsumer>();
  deliveries->Push(testing::StampDelivery("m-1", "o-1"));
  auto consumer =
      Consumer::Create(handler, options, std::move(deliveries), std::make_unique<FakePublisher>());
  if (consumer.ok()) (*consumer)->Step();
  std::exit(0);
}

// Each crash point kills the process (SIGKILL, as a power cut) where its
// option says: after the batch's commit and before its replies; after the
// replies' confirms and before the ack. Crash tests arm them by name.
TEST(ConsumerRoleTest, TheCrashPointsFireWhereNamed) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process reads OUTBOX_FAILPOINTS
  EXPECT_EXIT(
      StepWithArmed("shop.after_apply"), ::testing::KilledBySignal(SIGKILL),
      AllOf(HasSubstr("failpoint_crash point=shop.after_apply hit=1"), Not(HasSubstr("answered"))));
  EXPECT_EXIT(
      StepWithArmed("shop.before_ack"), ::testing::KilledBySignal(SIGKILL),
      AllOf(HasSubstr("answered 1"), HasSubstr("failpoint_crash point=shop.before_ack hit=1")));
  EXPECT_EXIT(StepWithArmed("shop.elsewhere"), ::testing::ExitedWithCode(0), "");
}

TEST_F(RolesTest, WithKeysWhatIsUnsignedIsDeadLettered) {
  const Signing signing = Signing::With(Keys());
  auto producer = MakeProducer(signing);
  ASSERT_OK(producer);
  auto consumer = MakeConsumer(signing);
  ASSERT_OK(consumer);

  Push(testing::StampDelivery("m-forged", "o-9", 1, "orders.replies", "OrderPlaced"));
  Push(testing::SignedBy(Keys("other"), testing::StampDelivery("m-other", "o-8")));
  DrainConsumer(**consumer);
  EXPECT_EQ((*consumer)->booked(), 0);
  EXPECT_EQ((*consumer)->unauthenticated(), 2);
  EXPECT_THAT(deliveries_->rejected, SizeIs(2));
  EXPECT_EQ(testing::CountRows(*stamps_, "stamps"), 0);

  ASSERT_OK(PlaceOrder(**producer, "o-1"));
  producer_replies_->Push(Delivered(DefaultReply("orders.replies", "m-o-1", "o-1", Applied{})));
  (*producer)->AckStep();
  EXPECT_EQ((*producer)->acknowledged(), 0);
  EXPECT_EQ((*producer)->dead_lettered_replies(), 1);
  auto row = (*producer)->Get("m-o-1");
  ASSERT_OK(row);
  EXPECT_EQ(row->status, OutboxStatus::kSending);
}

TEST_F(RolesTest, UnsignedByNameSendsAndAcceptsUnsigned) {
  auto producer = MakeProducer(Signing::Unsigned());
  ASSERT_OK(producer);
  auto consumer = MakeConsumer(Signing::Unsigned());
  ASSERT_OK(consumer);
  ASSERT_OK(PlaceOrder(**producer, "o-1"));
  (*producer)->RelayStep();
  ASSERT_THAT(publisher_->published, SizeIs(1));
  EXPECT_EQ(publisher_->published[0].signature, "");
  Push(Delivered(publisher_->published[0]));
  DrainConsumer(**consumer);
  EXPECT_EQ((*consumer)->booked(), 1);
  ASSERT_THAT(consumer_replies_->published, SizeIs(1));
  EXPECT_EQ(consumer_replies_->published[0].signature, "");
  producer_replies_->Push(Delivered(consumer_replies_->published[0]));
  (*producer)->AckStep();
  EXPECT_EQ((*producer)->acknowledged(), 1);
}

TEST_F(RolesTest, AMessageSpecKeepsTheTopicAndReplyQueueItNames) {
  auto producer = MakeProducer(Signing::Unsigned());
  ASSERT_OK(producer);
  MessageSpec spec;
  spec.message_id = "m-x";
  spec.biz_type = "order";
  spec.biz_key = "x";
  spec.topic = "invoices";
  spec.reply_to = "invoices.done";
  spec.message_type = "Invoice";
  ASSERT_OK((*producer)->Write(spec, [](SQLite::Database&) { return absl::OkStatus(); }));
  (*producer)->RelayStep();
  ASSERT_THAT(publisher_->published, SizeIs(1));
  EXPECT_EQ(publisher_->published[0].topic, "invoices");
  EXPECT_EQ(publisher_->published[0].reply_to, "invoices.done");
}

TEST_F(RolesTest, AFailedWriteHandsNothingToTheRelay) {
  auto producer = MakeProducer(Signing::Unsigned());
  ASSERT_OK(producer);
  ASSERT_OK(PlaceOrder(**producer, "o-1"));
  EXPECT_FALSE(PlaceOrder(**producer, "o-1").ok());  // the order is there: rolled back
  (*producer)->RelayStep();
  EXPECT_THAT(publisher_->published, SizeIs(1));
  auto counts = (*producer)->CountRows();
  ASSERT_OK(counts);
  EXPECT_EQ(counts->sending, 1);
}

// The writes of many callers share the producer's commits (its group
// writer, shared/sqlite/internal/group_writer.h): while one group is being written,
// the writes queued behind it form the next one. One failing write fails
// alone; each WriteAsync answers once.
TEST_F(RolesTest, TheWritesOfManyCallersShareOneCommit) {
  auto producer = MakeProducer(Signing::Unsigned());
  ASSERT_OK(producer);
  Notification held, release;
  (*producer)->WriteAsync(
      MessageSpec{"m-held", "order", "held", "", "OrderPlaced", "", "", ""},
      [&](SQLite::Database&) {
        held.Notify();
        release.WaitForNotification();
        return absl::OkStatus();
      },
      [](absl::StatusOr<OutboxMessage>) {});
  held.WaitForNotification();
  const int64_t groups = (*producer)->group_commits();
  constexpr int kThreads = 4;
  constexpr int kEach = 8;
  Mutex mu;
  std::map<std::string, int> answers;
  std::map<std::string, absl::Status> outcomes;
  std::vector<std::thread> callers;
  for (int t = 0; t < kThreads; ++t) {
    callers.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        // Order o-0-0 is written twice: its second write fails alone.
        const std::string order = t == 1 && i == 0 ? "o-0-0" : absl::StrCat("o-", t, "-", i);
        const std::string id = absl::StrCat("m-", t, "-", i);
        (*producer)->WriteAsync(
            MessageSpec{id, "order", id, "", "OrderPlaced", "", order, ""},
            [order](SQLite::Database& db) {
              SQLite::Statement insert(db, "INSERT INTO orders VALUES (?)");
              insert.bind(1, order);
              insert.exec();
              return absl::OkStatus();
            },
            [&, id](absl::StatusOr<OutboxMessage> row) {
              MutexLock lock(&mu);
              ++answers[id];
              outcomes[id] = row.status();
            });
      }
    });
  }
  for (std::thread& c : callers) c.join();
  release.Notify();
  (*producer)->Stop();  // commits what is queued, hands it to the relay
  EXPECT_EQ((*producer)->group_commits() - groups, 2) << "the held write's group, then one";
  MutexLock lock(&mu);
  ASSERT_EQ(answers.size(), static_cast<size_t>(kThreads * kEach));
  for (const auto& [id, n] : answers) EXPECT_EQ(n, 1) << id;
  int failed = 0;
  for (const auto& [id, status] : outcomes) failed += status.ok() ? 0 : 1;
  EXPECT_EQ(failed, 1);
  // One order each but the failed write's; one message each and the held one.
  EXPECT_EQ(testing::CountRows(*orders_, "orders"), kThreads * kEach - 1);
  EXPECT_EQ((*producer)->written(), kThreads * kEach);
  auto counts = (*producer)->CountRows();
  ASSERT_OK(counts);
  EXPECT_EQ(counts->sending, kThreads * kEach);
  // Once stopped, a write is refused.
  EXPECT_THAT(PlaceOrder(**producer, "late").status(), StatusIs(absl::StatusCode::kUnavailable));
}

// The ack listener's marks go through the producer's writer: a batch of
// replies is one more group commit.
TEST_F(RolesTest, AcknowledgementsRideTheProducersGroupCommit) {
  auto producer = MakeProducer(Signing::Unsigned());
  ASSERT_OK(producer);
  ASSERT_OK(PlaceOrder(**producer, "o-1"));
  ASSERT_OK(PlaceOrder(**producer, "o-2"));
  const int64_t groups = (*producer)->group_commits();
  for (const char* id : {"m-o-1", "m-o-2"}) {
    producer_replies_->Push(Delivered(DefaultReply("orders.replies", id, "", Applied{})));
  }
  (*producer)->AckStep();
  EXPECT_EQ((*producer)->acknowledged(), 2);
  EXPECT_EQ((*producer)->group_commits(), groups + 1);
  auto counts = (*producer)->WaitUntilClosed(absl::Now());
  ASSERT_OK(counts);
  EXPECT_EQ(counts->sent, 2);
}

TEST_F(RolesTest, TheGroupCommitsOptionsAreChecked) {
  Producer::Options producer;
  producer.queue = kQueue;
  producer.signing = Signing::Unsigned();
  producer.group_commit.max_batch = 0;
  EXPECT_THAT(Producer::Start(*orders_, producer).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("group_commit.max_batch")));
}

// Write's own ALREADY_EXISTS (the message has a row) is told from the
// adopter's, and a wait for the rows to close stops when told to.
TEST_F(RolesTest, TheProducersAlreadyExistsIsToldApartAndItsWaitStops) {
  auto producer = MakeProducer(Signing::Unsigned());
  ASSERT_OK(producer);
  ASSERT_OK(PlaceOrder(**producer, "o-1"));
  const absl::Status order_exists = PlaceOrder(**producer, "o-1").status();  // orders' key
  EXPECT_THAT(order_exists, StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_FALSE(IsOutboxRowExists(order_exists)) << order_exists;
  MessageSpec again;
  again.message_id = "m-o-1";  // the message id of o-1's row
  again.biz_type = "order";
  again.biz_key = "o-2";
  const absl::Status row_exists =
      (*producer)->Write(again, [](SQLite::Database&) { return absl::OkStatus(); }).status();
  EXPECT_THAT(row_exists, StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_TRUE(IsOutboxRowExists(row_exists)) << row_exists;

  EXPECT_THAT((*producer)->WaitUntilClosed(absl::InfiniteFuture(), [] { return true; }).status(),
              StatusIs(absl::StatusCode::kCancelled, HasSubstr("1 outbox rows still SENDING")));
}

// Start over the AMQP dialer, with no broker listening: the roles start,
// the producer commits (its rows wait SENDING), and each stops cleanly.
TEST_F(RolesTest, StartWithoutABrokerCommitsAndStops) {
  auto url = AmqpUrl::Parse("amqp://guest:guest@127.0.0.1:1/%2F");
  ASSERT_OK(url);
  Producer::Options producer;
  producer.amqp = *url;
  producer.queue = kQueue;
  producer.signing = Signing::With(Keys());
  auto started = Producer::Start(*orders_, producer);
  ASSERT_OK(started);
  ASSERT_OK(PlaceOrder(**started, "o-1"));
  auto counts = (*started)->CountRows();
  ASSERT_OK(counts);
  EXPECT_EQ(counts->sending, 1);
  EXPECT_THAT((*started)->WaitUntilClosed(absl::Now()).status(),
              StatusIs(absl::StatusCode::kDeadlineExceeded));
  (*started)->Stop();
  EXPECT_EQ((*started)->confirmed(), 0);

  Consumer::Options consumer;
  consumer.amqp = *url;
  consumer.queue = kQueue;
  consumer.signing = Signing::With(Keys());
  auto consuming = Consumer::Start(*handler_, consumer);
  ASSERT_OK(consuming);
  (*consuming)->Stop();
  EXPECT_EQ((*consuming)->booked(), 0);
}

TEST_F(RolesTest, RecoveryStartsOnTheProducersFileOnly) {
  auto url = AmqpUrl::Parse("amqp://guest:guest@127.0.0.1:1/%2F");
  ASSERT_OK(url);
  Recovery::Options options;
  options.amqp = *url;
  options.producer_db.schema = &OrdersSchema();
  options.queue = kQueue;
  options.signing = Signing::With(Keys());
  options.recovery.instance_id = "r1";
  options.wait_for_db = absl::ZeroDuration();
  options.db = dir_.path() + "/missing.db";  // never created by recovery
  EXPECT_THAT(Recovery::Start(options).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("missing.db")));
  options.db = dir_.path() + "/orders.db";
  auto recovery = Recovery::Start(options);
  ASSERT_OK(recovery);
  (*recovery)->Stop();
  EXPECT_EQ((*recovery)->republished(), 0);
}

// With start_workers false, Start opens, connects and hands out the
// operator's tools, and takes no lease until StartWorkers(): another
// instance started meanwhile takes it.
TEST_F(RolesTest, RecoveryStartedWithoutWorkersWaitsForStartWorkers) {
  auto url = AmqpUrl::Parse("amqp://guest:guest@127.0.0.1:1/%2F");
  ASSERT_OK(url);
  Recovery::Options options;
  options.amqp = *url;
  options.db = dir_.path() + "/orders.db";
  options.producer_db.schema = &OrdersSchema();
  options.queue = kQueue;
  options.signing = Signing::With(Keys());
  options.recovery.instance_id = "r1";
  options.recovery.idle_sleep = absl::Milliseconds(10);
  options.recovery.max_publish_failures = 1000000;  // the broker is away: keep the lease
  options.start_workers = false;
  auto first = Recovery::Start(options);
  ASSERT_OK(first);
  EXPECT_NE((*first)->store(), nullptr);
  EXPECT_NE((*first)->operator_store(), nullptr);
  EXPECT_NE((*first)->alerter(), nullptr);
  EXPECT_NE((*first)->dead_letters(), nullptr);

  options.recovery.instance_id = "r2";
  options.start_workers = true;
  auto second = Recovery::Start(options);
  ASSERT_OK(second);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!(*second)->lease_held() && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_TRUE((*second)->lease_held());
  EXPECT_FALSE((*first)->lease_held());
  EXPECT_FALSE((*first)->loop().lease_held());
  (*second)->Stop();
  (*first)->StartWorkers();
  (*first)->Stop();
}

// Start on a store of the caller's (a PostgreSQL one in production) makes
// the broker links as Start does and runs the loop on that store: it takes
// the lease there. There is no operator's view of a store it did not open.
TEST_F(RolesTest, RecoveryStartsOnAStoreOfTheCallers) {
  auto url = AmqpUrl::Parse("amqp://guest:guest@127.0.0.1:1/%2F");
  ASSERT_OK(url);
  Recovery::Options options;
  options.amqp = *url;
  options.queue = kQueue;
  options.signing = Signing::With(Keys());
  options.recovery.instance_id = "r1";
  options.recovery.idle_sleep = absl::Milliseconds(10);
  options.recovery.max_publish_failures = 1000000;  // the broker is away: keep the lease
  options.start_workers = false;
  EXPECT_THAT(Recovery::Start(options, nullptr).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("store")));
  SystemClock clock;
  auto store = std::make_unique<testing::InMemoryOutbox>(clock);
  testing::InMemoryOutbox& lease = *store;
  auto recovery = Recovery::Start(options, std::move(store));
  ASSERT_OK(recovery);
  EXPECT_EQ((*recovery)->store(), nullptr);
  EXPECT_EQ((*recovery)->operator_store(), nullptr);
  EXPECT_NE((*recovery)->alerter(), nullptr);
  EXPECT_NE((*recovery)->dead_letters(), nullptr);
  (*recovery)->StartWorkers();
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!(*recovery)->lease_held() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_TRUE((*recovery)->lease_held());
  (*recovery)->Stop();  // its thread gone: the store is read here alone
  auto held = lease.Lease();
  ASSERT_OK(held);
  EXPECT_EQ(held->holder, "r1");  // taken on this store, given up at Stop
}

// The dead-letter connection goes by the name given (a broker's connection
// list shows it, as do the logs).
TEST_F(RolesTest, RecoveryNamesItsDeadLetterConnectionAsTold) {
  auto url = AmqpUrl::Parse("amqp://guest:guest@127.0.0.1:1/%2F");
  ASSERT_OK(url);
  Mutex mu;
  std::vector<std::string> lines;
  SetLogSink([&](const LogRecord& r) {
    MutexLock lock(&mu);
    lines.emplace_back(r.line);
  });
  Recovery::Options options;
  options.amqp = *url;
  options.db = dir_.path() + "/orders.db";
  options.producer_db.schema = &OrdersSchema();
  options.queue = kQueue;
  options.signing = Signing::Unsigned();
  options.recovery.instance_id = "r1";
  options.recovery.idle_sleep = absl::Milliseconds(10);
  options.recovery.housekeeping_every = absl::ZeroDuration();
  options.recovery.max_publish_failures = 1000000;
  options.dead_letters_name = "shop-dead-letters";
  auto recovery = Recovery::Start(options);
  ASSERT_OK(recovery);
  auto logged = [&](const std::string& text) {
    MutexLock lock(&mu);
    for (const std::string& line : lines) {
      if (line.find(text) != std::string::npos) return true;
    }
    return false;
  };
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!logged("connection=shop-dead-letters ") && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  (*recovery)->Stop();
  SetLogSink(nullptr);
  EXPECT_TRUE(logged("connection=shop-dead-letters "));
  EXPECT_FALSE(logged("connection=recovery-dead-letters-r1"));
}

TEST(HandOverAfterTest, TheFirstRetryDelayShortestOverTheTopics) {
  RetryPolicy retry;
  retry.base_delay = absl::Seconds(5);
  retry.max_delay = absl::Seconds(3);
  EXPECT_EQ(HandOverAfter(retry), absl::Seconds(3));  // capped as the retry is
  retry.max_delay = absl::Minutes(5);
  EXPECT_EQ(HandOverAfter(retry), absl::Seconds(5));
  retry.topics["invoices"].base_delay = absl::Seconds(2);
  retry.topics["orders"].base_delay = absl::Seconds(30);
  EXPECT_EQ(HandOverAfter(retry), absl::Seconds(2));
}

// Recovery's options over `clock`, signed as `signing` says, the producer's
// queue kQueue.
Recovery::Options RecoveryOptionsFor(testing::ManualClock& clock, Signing signing) {
  Recovery::Options options;
  options.queue = kQueue;
  options.signing = std::move(signing);
  options.clock = &clock;
  options.recovery.instance_id = "r1";
  return options;
}

// An OrderPlaced row of `id` to kQueue, as the producer writes it.
OutboxMessage OrderRow(const std::string& id, const testing::ManualClock& clock,
                       const RetryPolicy& retry) {
  MessageSpec spec;
  spec.message_id = id;
  spec.biz_type = "order";
  spec.biz_key = "o-" + id;
  spec.topic = kQueue;
  spec.reply_to = "orders.replies";
  spec.message_type = "OrderPlaced";
  return NewOutboxMessage(spec, clock.NowMillis(), retry);
}

// Recovery's publisher is its own, and signs with the process's keys; its
// queues come from the producer's.
TEST(RecoveryRoleTest, RepublishesSignedWithTheProducersQueues) {
  testing::ManualClock clock;
  const Signing signing = Signing::With(Keys());
  Recovery::Options options = RecoveryOptionsFor(clock, signing);
  options.recovery.idle_sleep = absl::Milliseconds(1);
  auto store = std::make_unique<testing::InMemoryOutbox>(clock);
  auto publisher = std::make_unique<FakePublisher>();
  testing::InMemoryOutbox* rows = store.get();
  FakePublisher* broker = publisher.get();
  rows->Add(OrderRow("m-1", clock, options.recovery.retry));
  auto recovery = Recovery::Create(options, std::move(store), std::move(publisher),
                                   std::make_unique<testing::RecordingAlerts>());
  ASSERT_OK(recovery);
  const RecoveryOptions& loop = (*recovery)->options().recovery;
  EXPECT_EQ(loop.watched_queues, std::vector<std::string>{kQueue});
  EXPECT_EQ(loop.reply_queues, std::vector<std::string>{"orders.replies"});
  EXPECT_EQ(loop.dead_letter_sources, (std::vector<std::string>{kQueue, "orders.replies"}));

  clock.Advance(options.recovery.retry.DelayAfter(1) + absl::Seconds(1));
  for (int i = 0; i < 5 && (*recovery)->republished() == 0; ++i) (*recovery)->Step();
  EXPECT_EQ((*recovery)->republished(), 1);
  ASSERT_THAT(broker->published, SizeIs(1));
  EXPECT_EQ(broker->published[0].message_id, "m-1");
  EXPECT_OK(signing.keys()->Verify(Delivered(broker->published[0])));
}

// The role's housekeeping removes the dead letters whose message was booked
// since, and dead_letters() moves the others back to their queue.
TEST(RecoveryRoleTest, SweepsBookedDeadLettersAndRedrivesTheRest) {
  testing::ManualClock clock;
  const Signing signing = Signing::With(Keys());
  Recovery::Options options = RecoveryOptionsFor(clock, signing);
  options.recovery.idle_sleep = absl::ZeroDuration();
  options.recovery.housekeeping_every = absl::ZeroDuration();
  auto store = std::make_unique<testing::InMemoryOutbox>(clock);
  auto browser = std::make_unique<testing::FakeQueueBrowser>();
  testing::InMemoryOutbox* rows = store.get();
  testing::FakeQueueBrowser* broker = browser.get();
  for (const char* id : {"m-1", "m-2"}) {
    OutboxMessage row = OrderRow(id, clock, options.recovery.retry);
    rows->Add(row);
    broker->queues[std::string(kQueue) + ".DLQ"].push_back(
        testing::SignedBy(*signing.keys(), testing::DeliveryOf(ToOutgoing(row))));
  }
  ASSERT_OK(rows->RecordAcks({"m-1"}));  // a later copy of m-1 was booked
  auto recovery =
      Recovery::Create(options, std::move(store), std::make_unique<FakePublisher>(),
                       std::make_unique<testing::RecordingAlerts>(), std::move(browser));
  ASSERT_OK(recovery);
  EXPECT_EQ((*recovery)->store(), nullptr);  // not a RecoveryStore
  EXPECT_EQ((*recovery)->operator_store(), nullptr);
  ASSERT_NE((*recovery)->dead_letters(), nullptr);

  (*recovery)->Step();
  const auto& parked = broker->queues[std::string(kQueue) + ".DLQ"];
  ASSERT_THAT(parked, SizeIs(1));
  EXPECT_EQ(parked.front().message_id, "m-2");

  const DeadLettersRedriven moved = (*recovery)->dead_letters()->Redrive(kQueue, 0, "alice");
  ASSERT_OK(moved.status);
  EXPECT_EQ(moved.moved, 1);
  ASSERT_THAT(broker->published, SizeIs(1));
  EXPECT_EQ(broker->published[0].first, "");  // the default exchange routes by queue name
  EXPECT_EQ(broker->published[0].second.topic, kQueue);
  EXPECT_EQ(broker->published[0].second.message_id, "m-2");
  EXPECT_THAT(parked, SizeIs(0));
}

// OutboxDeadLetters counts a dead-letter queue as a listing does (under the
// queue's lock), not by the broker's ready count, which leaves out what
// another process has taken to look at.
TEST(RecoveryRoleTest, TheDeadLetterAlertCountsAsAListingDoes) {
  testing::ManualClock clock;
  const Signing signing = Signing::With(Keys());
  Recovery::Options options = RecoveryOptionsFor(clock, signing);
  options.recovery.idle_sleep = absl::ZeroDuration();
  options.recovery.housekeeping_every = absl::ZeroDuration();
  auto browser = std::make_unique<testing::FakeQueueBrowser>();
  OutboxMessage row = OrderRow("m-1", clock, options.recovery.retry);
  browser->queues[std::string(kQueue) + ".DLQ"].push_back(
      testing::SignedBy(*signing.keys(), testing::DeliveryOf(ToOutgoing(row))));
  auto publisher = std::make_unique<FakePublisher>();
  publisher->queues[std::string(kQueue) + ".DLQ"] = {0, 0};  // all of it out with another
  auto alerts = std::make_unique<testing::RecordingAlerts>();
  testing::RecordingAlerts* sink = alerts.get();
  auto store = std::make_unique<testing::InMemoryOutbox>(clock);
  store->Add(row);
  auto recovery = Recovery::Create(options, std::move(store), std::move(publisher),
                                   std::move(alerts), std::move(browser));
  ASSERT_OK(recovery);
  (*recovery)->Step();
  EXPECT_EQ(sink->Active("OutboxDeadLetters"), 1);
}

// Each dead-letter source goes back through the exchange named for it, the
// others through the default exchange; a name that is not a source is refused.
TEST(RecoveryRoleTest, RedrivesEachSourceThroughItsExchange) {
  testing::ManualClock clock;
  const Signing signing = Signing::With(Keys());
  Recovery::Options options = RecoveryOptionsFor(clock, signing);
  options.redrive_exchanges[kQueue] = "orders.events";
  auto browser = std::make_unique<testing::FakeQueueBrowser>();
  testing::FakeQueueBrowser* broker = browser.get();
  auto store = std::make_unique<testing::InMemoryOutbox>(clock);
  OutboxMessage row = OrderRow("m-1", clock, options.recovery.retry);
  broker->queues[std::string(kQueue) + ".DLQ"].push_back(
      testing::SignedBy(*signing.keys(), testing::DeliveryOf(ToOutgoing(row))));
  row.message_id = "m-2";
  row.topic = "orders.replies";
  broker->queues["orders.replies.DLQ"].push_back(
      testing::SignedBy(*signing.keys(), testing::DeliveryOf(ToOutgoing(row))));
  auto recovery =
      Recovery::Create(options, std::move(store), std::make_unique<FakePublisher>(),
                       std::make_unique<testing::RecordingAlerts>(), std::move(browser));
  ASSERT_OK(recovery);

  ASSERT_OK((*recovery)->dead_letters()->Redrive(kQueue, 0, "alice").status);
  ASSERT_OK((*recovery)->dead_letters()->Redrive("orders.replies", 0, "alice").status);
  ASSERT_THAT(broker->published, SizeIs(2));
  EXPECT_EQ(broker->published[0].first, "orders.events");
  EXPECT_EQ(broker->published[0].second.message_id, "m-1");
  EXPECT_EQ(broker->published[1].first, "");
  EXPECT_EQ(broker->published[1].second.message_id, "m-2");

  options.redrive_exchanges["elsewhere"] = "orders.events";
  EXPECT_THAT(Recovery::Create(options, std::make_unique<testing::InMemoryOutbox>(clock),
                               std::make_unique<FakePublisher>(),
                               std::make_unique<testing::RecordingAlerts>())
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("redrive_exchanges"), HasSubstr("elsewhere"))));
}

// loop() is the loop that Step() drives; alerter() is the one Start makes,
// none over the caller's alert sink.
TEST(RecoveryRoleTest, TheLoopAndTheAlerterAreReadable) {
  testing::ManualClock clock;
  Recovery::Options options = RecoveryOptionsFor(clock, Signing::Unsigned());
  auto store = std::make_unique<testing::InMemoryOutbox>(clock);
  store->Add(OrderRow("m-1", clock, options.recovery.retry));
  auto recovery = Recovery::Create(options, std::move(store), std::make_unique<FakePublisher>(),
                                   std::make_unique<testing::RecordingAlerts>());
  ASSERT_OK(recovery);
  EXPECT_EQ((*recovery)->alerter(), nullptr);
  EXPECT_FALSE((*recovery)->loop().lease_held());
  clock.Advance(options.recovery.retry.DelayAfter(1) + absl::Seconds(1));
  for (int i = 0; i < 5 && (*recovery)->republished() == 0; ++i) (*recovery)->Step();
  EXPECT_TRUE((*recovery)->loop().lease_held());
  EXPECT_EQ((*recovery)->loop().republished(), 1);
}

TEST(RecoveryRoleTest, WithoutABrowserThereAreNoDeadLetterTools) {
  testing::ManualClock clock;
  Recovery::Options options = RecoveryOptionsFor(clock, Signing::Unsigned());
  auto recovery = Recovery::Create(options, std::make_unique<testing::InMemoryOutbox>(clock),
                                   std::make_unique<FakePublisher>(),
                                   std::make_unique<testing::RecordingAlerts>());
  ASSERT_OK(recovery);
  EXPECT_EQ((*recovery)->dead_letters(), nullptr);
  options.sweep_dead_letters = -1;
  EXPECT_THAT(Recovery::Create(options, std::make_unique<testing::InMemoryOutbox>(clock),
                               std::make_unique<FakePublisher>(),
                               std::make_unique<testing::RecordingAlerts>())
                  .status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sweep_dead_letters")));
}

}  // namespace
}  // namespace outbox
