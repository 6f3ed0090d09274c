#pragma once

// A producer's file for recovery's stores' tests (recovery_store_test.cc,
// operator_store_test.cc): the schema, the file as its producer makes it,
// the loop's store (store_), the operator's verbs on it (ops_), a raw
// connection to insert rows as any producer would (raw_), and a retry
// policy (policy_). Stays in this tree; not part of the test kit.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include <SQLiteCpp/SQLiteCpp.h>

#include "shared/outbox/message.h"
#include "shared/outbox/retry_policy.h"
#include "shared/sqlite/internal/operator_store.h"
#include "shared/sqlite/internal/recovery_store.h"
#include "shared/sqlite/outbox_table.h"
#include "shared/sqlite/schema.h"
#include "shared/sqlite/sqlite_file.h"
#include "shared/testing/status_matchers.h"

namespace outbox::testing {

// A producer's schema: the outbox tables, then one change of its own.
inline const DbSchema& ProducerSchema() {
  static const DbSchema* const schema = new DbSchema{{
      {"outbox tables", CreateOutboxTable},
      {"orders", [](SQLite::Database& db) { db.exec("CREATE TABLE orders (id TEXT)"); }},
  }};
  return *schema;
}

inline const ProducerDb& Producer() {
  static const ProducerDb* const db =
      new ProducerDb{&ProducerSchema(), "order_service", "ORDERS_DB", "orders", "orders database"};
  return *db;
}

// What the producer does on start: create the file at the latest schema version.
inline void CreateProducerDb(const std::string& path) {
  auto file = OpenSqliteFile(path, DbOptions{}, &ProducerSchema());
  ASSERT_OK(file);
}

class ProducerFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/producer_file_test.XXXXXX";
    dir_ = mkdtemp(tmpl);
    CreateProducerDb(dir_ + "/orders.db");
    auto s = RecoveryStore::Open(dir_ + "/orders.db", DbOptions{}, Producer());
    ASSERT_OK(s);
    store_ = std::move(s).value();
    ops_ = std::make_unique<OperatorStore>(*store_);
    raw_ = std::make_unique<SQLite::Database>(dir_ + "/orders.db", SQLite::OPEN_READWRITE);
    policy_.base_delay = absl::Seconds(2);
    policy_.max_delay = absl::Seconds(5);
    policy_.max_attempts = 3;
  }
  void TearDown() override {
    raw_.reset();
    ops_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Insert(const std::string& id, OutboxStatus status, int attempts, int64_t next_retry_at,
              int64_t sent_at = 0, int64_t created_at = 1) {
    OutboxMessage r;
    r.message_id = id;
    r.biz_type = "order";
    r.biz_key = "order-" + id;
    r.topic = "orders";
    r.message_type = "OrderPlaced";
    r.reply_to = "order-replies";
    r.payload = "p";
    r.status = status;
    r.attempts = attempts;
    r.max_attempts = 3;
    r.next_retry_at = next_retry_at;
    r.created_at = created_at;
    r.updated_at = created_at;
    r.sent_at = sent_at;
    OutboxInserter(*raw_).Insert(r);
  }

  std::string dir_;
  std::unique_ptr<RecoveryStore> store_;
  std::unique_ptr<OperatorStore> ops_;  // the operator's verbs on store_'s file
  std::unique_ptr<SQLite::Database> raw_;
  RetryPolicy policy_;
};

}  // namespace outbox::testing
