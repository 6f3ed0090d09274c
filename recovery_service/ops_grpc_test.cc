#include "recovery_service/ops_grpc.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "service_kit/payment_db_schema.h"
#include "shared/sqlite/internal/operator_store.h"
#include "shared/sqlite/internal/recovery_store.h"
#include "shared/testing/fakes.h"
#include "shared/testing/manual_clock.h"
#include "shared/testing/status_matchers.h"

namespace outbox::recovery {
namespace {

// The ops API over a real payment.db and a fake broker.
class OpsDeadLettersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ops_grpc_test.XXXXXX";
    dir_ = mkdtemp(tmpl);
    const std::string path = dir_ + "/payment.db";
    ASSERT_OK(OpenSqliteFile(path, DbOptions{}, &PaymentDbSchema()));
    auto store = RecoveryStore::Open(path, DbOptions{}, PaymentProducerDb());
    ASSERT_OK(store);
    store_ = *std::move(store);
    operator_store_ = std::make_unique<OperatorStore>(*store_);
    options_.instance_id = "r1";
    options_.watched_queues = {"PAY_QUEUE"};
    loop_ =
        std::make_unique<RecoveryLoop>(*store_, publisher_, alerts_, clock_, metrics_, options_);
    ops_ = std::make_unique<OutboxOpsImpl>(*store_, *operator_store_, *loop_, alerter_,
                                           dead_letters_, clock_);
  }
  void TearDown() override {
    ops_.reset();
    loop_.reset();
    operator_store_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  std::string dir_;
  testing::ManualClock clock_;
  testing::FakePublisher publisher_;
  testing::RecordingAlerts alerts_;
  MetricsRegistry metrics_;
  RecoveryOptions options_;
  Alerter alerter_{AlerterOptions{"", "recovery_service"}};
  testing::FakeQueueBrowser broker_;
  DeadLetters dead_letters_{broker_, {{"PAY_QUEUE", "outbox.payments"}}};
  std::unique_ptr<RecoveryStore> store_;
  std::unique_ptr<OperatorStore> operator_store_;
  std::unique_ptr<RecoveryLoop> loop_;
  std::unique_ptr<OutboxOpsImpl> ops_;
};

// The connection dies at the third ack: two messages are back in their
// queue (and may book), so the audit record says two, with the error, and
// so does the answer.
TEST_F(OpsDeadLettersTest, ARedriveThatStopsHalfwayIsAuditedWithWhatMoved) {
  for (const char* id : {"m1", "m2", "m3", "m4"}) {
    Delivery d;
    d.message_id = id;
    d.body = "body";
    broker_.queues["PAY_QUEUE.DLQ"].push_back(d);
  }
  broker_.fail_ack = 3;
  grpc::ServerContext context;
  ::ops::v1::RedriveDeadLettersRequest req;
  req.set_queue("PAY_QUEUE");
  ::ops::v1::RedriveDeadLettersResponse resp;
  const grpc::Status s = ops_->RedriveDeadLetters(&context, &req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE) << s.error_message();
  EXPECT_NE(s.error_message().find("2 moved back"), std::string::npos) << s.error_message();

  auto audit = operator_store_->Audit(0, 10);
  ASSERT_OK(audit);
  ASSERT_EQ(audit->size(), 1u);
  const AuditRecord& record = audit->front();
  EXPECT_EQ(record.action, "redrive_dead_letters");
  EXPECT_EQ(record.target, "PAY_QUEUE");
  EXPECT_EQ(record.rows, 2);
  EXPECT_EQ(record.outcome, "fake connection lost");
}

}  // namespace
}  // namespace outbox::recovery
