// Resource faults on the real binaries: a database path that holds no SQLite
// database stops a service at start (exit 2, saying so); the files a service
// creates are private (0600); a full disk (a file size limit: RLIMIT_FSIZE,
// inherited by the service, lifted later with prlimit) makes CreatePayment
// answer RESOURCE_EXHAUSTED with nothing half-written, and accounting hold
// its batch (kept unacked and applied again, never requeued, so RabbitMQ
// 4.0's delivery limit on a quorum queue never dead-letters it); both
// recover, losing nothing, once there is room again. A payment that
// accounting.db refuses for good is dead-lettered, and the others booked.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <csignal>
#include <fstream>
#include <iostream>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/channel.h"
#include "shared/amqp/internal/amqp_client.h"
#include "shared/sqlite/sqlite_file.h"
#include "shared/testing/status_matchers.h"
#include "tests/support/services.h"

namespace outbox::testing {
namespace {

using ::payment::v1::CreatePaymentRequest;
using ::payment::v1::CreatePaymentResponse;

CreatePaymentRequest Request(const std::string& key) {
  CreatePaymentRequest r;
  r.set_idempotency_key(key);
  r.set_payer_account("acct-alice");
  r.set_payee_account("acct-bob");
  r.set_amount_minor(100);
  r.set_currency("EUR");
  r.set_description(std::string(250, 'd'));  // fills the file sooner
  return r;
}

grpc::Status Create(ServiceSet& s, const std::string& key, CreatePaymentResponse* resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(absl::Seconds(10)));
  return s.payments().CreatePayment(&ctx, Request(key), resp);
}

mode_t ModeOf(const std::string& path) {
  struct stat st = {};
  if (stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 0777;
}

// While alive, this process's file size limit is `bytes` (SIGXFSZ ignored):
// a service started meanwhile inherits it.
class InheritedFileSizeLimit {
 public:
  explicit InheritedFileSizeLimit(rlim_t bytes) {
    getrlimit(RLIMIT_FSIZE, &saved_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit lowered = saved_;
    lowered.rlim_cur = bytes;
    EXPECT_EQ(setrlimit(RLIMIT_FSIZE, &lowered), 0);
  }
  ~InheritedFileSizeLimit() {
    setrlimit(RLIMIT_FSIZE, &saved_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit saved_{};
  void (*old_handler_)(int) = SIG_DFL;
};

// Gives `pid` this process's own file size limit back: space returns.
void LiftFileSizeLimit(pid_t pid) {
  rlimit ours{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &ours), 0);
  ASSERT_EQ(prlimit(pid, RLIMIT_FSIZE, &ours, nullptr), 0);
}

constexpr rlim_t kFileLimit = 256 * 1024;

void ExpectStopsOnForeignFile(const std::string& binary, const std::string& db_var) {
  ServiceSet services;
  Env env = services.ServiceEnv();
  const std::string path = env.at(db_var);
  std::ofstream(path) << "name,amount\nalice,100\n";  // a CSV where the database should be
  env["PAYMENT_LISTEN"] = "127.0.0.1:0";
  env["ACCOUNTING_LISTEN"] = "127.0.0.1:0";
  Process p;
  p.Start(BinaryPath(binary), {}, env, absl::StrCat(services.dir(), "/", binary, ".log"));
  EXPECT_EQ(p.WaitExit(absl::Seconds(60)), 2) << p.Log();
  EXPECT_NE(p.Log().find(absl::StrCat(path, ": is not a SQLite database")), std::string::npos)
      << p.Log();
  // The file is left as it was: nothing was written into it.
  std::ifstream in(path);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "name,amount");
}

TEST(ResourcesTest, PaymentServiceRefusesAFileThatIsNotADatabase) {
  ExpectStopsOnForeignFile("payment_service", "PAYMENT_DB");
}

TEST(ResourcesTest, AccountingServiceRefusesAFileThatIsNotADatabase) {
  ExpectStopsOnForeignFile("accounting_service", "ACCOUNTING_DB");
}

TEST(ResourcesTest, DatabaseFilesArePrivate) {
  ServiceSet services;
  services.StartAll();
  CreatePaymentResponse resp;
  ASSERT_OK(client::FromGrpc(Create(services, "private-1", &resp), "CreatePayment"));
  ASSERT_TRUE(PollUntil([&] { return services.AllVouchers().size() == 1; }, absl::Seconds(60)));
  const Env env = services.ServiceEnv();
  for (const std::string& db : {env.at("PAYMENT_DB"), env.at("ACCOUNTING_DB")}) {
    for (const std::string& suffix : {"", "-wal", "-shm"}) {
      EXPECT_EQ(ModeOf(db + suffix), 0600u) << db << suffix;
    }
  }
}

TEST(ResourcesTest, FullPaymentDbAnswersResourceExhaustedThenRecovers) {
  ServiceSet services;
  services.StartAccounting();
  {
    InheritedFileSizeLimit limit(kFileLimit);
    services.StartPayment();
  }
  // Fill payment.db and its WAL until a commit is refused for good. A refusal
  // can be brief (a checkpoint empties the WAL): then the same request,
  // retried, creates the payment: the refused attempt wrote nothing.
  int committed = 0;
  int brief_refusals = 0;
  std::string full_key;
  grpc::Status full;
  for (int i = 0; i < 5000 && full_key.empty(); ++i) {
    const std::string key = absl::StrCat("fill-", i);
    CreatePaymentResponse resp;
    grpc::Status s = Create(services, key, &resp);
    if (s.ok()) {
      ++committed;
      continue;
    }
    ASSERT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    full = s;
    if (PollUntil([&] { return Create(services, key, &resp).ok(); }, absl::Seconds(2))) {
      EXPECT_FALSE(resp.replayed()) << key;
      ++committed;
      ++brief_refusals;
    } else {
      full_key = key;
    }
  }
  ASSERT_FALSE(full_key.empty()) << "payment.db never filled " << kFileLimit << " bytes";
  std::cout << "payment.db full after " << committed << " payments (" << brief_refusals
            << " brief refusals): " << full.error_message() << "\n";
  EXPECT_TRUE(services.payment().Running());

  LiftFileSizeLimit(services.payment().pid());
  // The refused request left nothing behind: its retry creates the payment.
  CreatePaymentResponse resp;
  ASSERT_TRUE(PollUntil([&] { return Create(services, full_key, &resp).ok(); }, absl::Seconds(30)));
  EXPECT_FALSE(resp.replayed());
  EXPECT_EQ(static_cast<int>(services.AllPayments().size()), committed + 1);
  // And every payment committed before or after is booked exactly once.
  ASSERT_TRUE(
      PollUntil([&] { return static_cast<int>(services.AllVouchers().size()) == committed + 1; },
                absl::Seconds(120)))
      << services.AllVouchers().size() << " vouchers for " << committed + 1 << " payments";
}

// Over a classic queue and a quorum queue: RabbitMQ 4.0 dead-letters a
// quorum queue's message after 20 deliveries, so a consumer that sent its
// batch back at each refusal would lose the whole backlog to the DLQ within
// seconds of a full disk.
class FullAccountingDbTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FullAccountingDbTest, HoldsItsBatchThenBooksEverythingAndDeadLettersNothing) {
  ServiceSet services({{"QUEUE_TYPE", GetParam()}});
  {
    InheritedFileSizeLimit limit(kFileLimit);
    services.StartAccounting();
  }
  services.StartPayment();
  // Create payments in rounds until accounting stops booking them.
  int created = 0;
  auto all_booked = [&] { return static_cast<int>(services.AllVouchers().size()) == created; };
  bool stuck = false;
  for (int round = 0; round < 60 && !stuck; ++round) {
    for (int i = 0; i < 50; ++i) {
      CreatePaymentResponse resp;
      grpc::Status s = Create(services, absl::StrCat("acc-", created), &resp);
      ASSERT_OK(client::FromGrpc(s, "CreatePayment"));
      ++created;
    }
    // Slow is not stuck: stuck is behind and having said why.
    stuck = !PollUntil(all_booked, absl::Seconds(3)) &&
            services.accounting().Log().find("disk full") != std::string::npos;
  }
  ASSERT_TRUE(stuck) << "accounting.db never filled " << kFileLimit << " bytes";
  // The disk stays full for 10 s: at the old 200 ms requeue, some 50
  // returns per message.
  absl::SleepFor(absl::Seconds(10));
  const std::string log = services.accounting().Log();
  EXPECT_NE(log.find("batch_held"), std::string::npos) << log;
  EXPECT_NE(log.find("disk full"), std::string::npos) << log;
  EXPECT_EQ(log.find("batch_requeued"), std::string::npos) << log;
  EXPECT_TRUE(services.accounting().Running());
  std::cout << "accounting.db full after " << created << " payments, "
            << services.AllVouchers().size() << " booked; the batch was tried " <<
      [&] {
        int n = 0;
        for (size_t at = log.find("batch_held"); at != std::string::npos;
             at = log.find("batch_held", at + 1))
          ++n;
        return n;
      }() << " times while the disk was full\n";

  LiftFileSizeLimit(services.accounting().pid());
  // Nothing was lost: the held deliveries are booked, each once.
  ASSERT_TRUE(PollUntil(all_booked, absl::Seconds(120)))
      << services.AllVouchers().size() << " vouchers for " << created << " payments";
  std::set<std::string> paid;
  for (const auto& v : services.AllVouchers()) paid.insert(v.payment_id());
  EXPECT_EQ(static_cast<int>(paid.size()), created);
  // And nothing reached the dead-letter queue.
  auto url = AmqpUrl::Parse(services.broker().amqp_url);
  ASSERT_OK(url);
  auto observer = AmqpConnection::Connect(*url, "test-observer");
  ASSERT_OK(observer);
  auto dead = (*observer)->MessageCount(Topology::DeadLetterQueue(services.pay_queue()));
  ASSERT_OK(dead);
  EXPECT_EQ(*dead, 0u);
}

INSTANTIATE_TEST_SUITE_P(QueueTypes, FullAccountingDbTest, ::testing::Values("classic", "quorum"),
                         [](const auto& info) { return info.param; });

// A payment accounting.db refuses for good (here a trigger raises for its
// amount, as a constraint would) must not stop accounting: held, its batch
// would be tried forever, no delivery spent. It is dead-lettered with the
// database's error, and every other payment is booked, before it and after.
TEST(ResourcesTest, APaymentAccountingDbRefusesForGoodIsDeadLetteredAndTheOthersAreBooked) {
  ServiceSet services;
  services.StartAccounting();
  {
    auto db = OpenDatabase(services.dir() + "/accounting.db", DbOptions{});
    ASSERT_OK(db);
    (*db)->exec(
        "CREATE TRIGGER refuse_4242 BEFORE INSERT ON vouchers WHEN NEW.amount_minor = 4242 "
        "BEGIN SELECT RAISE(ABORT, 'this test refuses amount 4242'); END");
  }
  services.StartPayment();
  constexpr int kPayments = 12, kRefused = 5;
  constexpr size_t kBooked = kPayments - 1;
  std::string refused_id;
  for (int i = 0; i < kPayments; ++i) {
    CreatePaymentRequest req = Request(absl::StrCat("refused-", i));
    if (i == kRefused) req.set_amount_minor(4242);
    CreatePaymentResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(DeadlineIn(absl::Seconds(10)));
    ASSERT_OK(
        client::FromGrpc(services.payments().CreatePayment(&ctx, req, &resp), "CreatePayment"));
    if (i == kRefused) refused_id = resp.payment().payment_id();
  }
  ASSERT_TRUE(
      PollUntil([&] { return services.AllVouchers().size() == kBooked; }, absl::Seconds(60)))
      << services.AllVouchers().size() << " vouchers for " << kBooked << " payments";
  auto url = AmqpUrl::Parse(services.broker().amqp_url);
  ASSERT_OK(url);
  auto observer = AmqpConnection::Connect(*url, "test-observer");
  ASSERT_OK(observer);
  ASSERT_TRUE(PollUntil(
      [&] {
        auto dead = (*observer)->MessageCount(Topology::DeadLetterQueue(services.pay_queue()));
        return dead.ok() && *dead == 1u;
      },
      absl::Seconds(30)));
  for (const auto& v : services.AllVouchers()) EXPECT_NE(v.payment_id(), refused_id);
  const std::string log = services.accounting().Log();
  const size_t dead_lettered = log.find("message_dead_lettered");
  ASSERT_NE(dead_lettered, std::string::npos) << log;
  EXPECT_NE(log.find("this test refuses amount 4242", dead_lettered), std::string::npos) << log;
  EXPECT_EQ(log.find("batch_held"), std::string::npos) << log;
  EXPECT_TRUE(services.accounting().Running());
  const size_t split = log.find("batch_not_applied");
  ASSERT_NE(split, std::string::npos) << log;
  std::cout << log.substr(split, log.find('\n', split) - split) << "\n";
}

}  // namespace
}  // namespace outbox::testing
