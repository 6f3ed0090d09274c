#include "accounting_service/accounting_flags.h"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "shared/testing/scoped_flags.h"

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "shared/testing/status_matchers.h"

namespace outbox::accounting {
namespace {

void ExpectRefused(const AccountingServiceOptions& options, const std::string& message) {
  absl::Status status = options.Validate();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(status.message(), message);
}

TEST(AccountingServiceOptionsTest, AcceptsTheDefaults) {
  EXPECT_OK(AccountingServiceOptions{}.Validate());
}

TEST(AccountingServiceOptionsTest, AcceptsTheBounds) {
  AccountingServiceOptions o;
  o.service.accounting_shards = 4;
  o.shard = 3;
  o.prefetch = 1;
  o.processed_retention = absl::ZeroDuration();  // keeps every id
  EXPECT_OK(o.Validate());
  o.shard = 0;
  o.prefetch = 65535;
  EXPECT_OK(o.Validate());
}

TEST(AccountingServiceOptionsTest, RefusesAShardOutsideTheShards) {
  AccountingServiceOptions o;
  o.shard = 1;  // one shard: only 0
  ExpectRefused(o, "--accounting_shard must be 0..0 (--accounting_shards - 1)");
  o.service.accounting_shards = 4;
  o.shard = 4;
  ExpectRefused(o, "--accounting_shard must be 0..3 (--accounting_shards - 1)");
  o.shard = -1;
  ExpectRefused(o, "--accounting_shard must be 0..3 (--accounting_shards - 1)");
}

TEST(AccountingServiceOptionsTest, RefusesAPrefetchOutside1To65535) {
  for (int prefetch : {0, -1, 65536}) {
    AccountingServiceOptions o;
    o.prefetch = prefetch;
    ExpectRefused(o, "--prefetch must be 1..65535");
  }
}

TEST(AccountingServiceOptionsTest, RefusesAConsumeLingerOutside0To1000) {
  for (int linger_ms : {-1, 1001}) {
    AccountingServiceOptions o;
    o.consume_linger_ms = linger_ms;
    ExpectRefused(o, "--consume_linger_ms must be 0..1000");
  }
  AccountingServiceOptions o;
  for (int linger_ms : {0, 1000}) {
    o.consume_linger_ms = linger_ms;
    EXPECT_OK(o.Validate());
  }
  o.consume_linger_batch = 0;
  ExpectRefused(o, "--consume_linger_batch must be at least 1");
}

TEST(AccountingServiceOptionsTest, RefusesANegativeProcessedRetention) {
  AccountingServiceOptions o;
  o.processed_retention = absl::Seconds(-1);
  ExpectRefused(o, "--processed_retention must be >= 0 (0 keeps every id)");
}

TEST(AccountingServiceOptionsTest, ChecksTheShardThenThePrefetchThenTheRetention) {
  AccountingServiceOptions o;
  o.shard = 1;
  o.prefetch = 0;
  o.processed_retention = absl::Seconds(-1);
  ExpectRefused(o, "--accounting_shard must be 0..0 (--accounting_shards - 1)");
  o.shard = 0;
  ExpectRefused(o, "--prefetch must be 1..65535");
}

// Each default lives once: the consumer's in the library's options, which
// AccountingServiceOptions takes, and the flags take AccountingServiceOptions'.
TEST(AccountingOptionsFromFlagsTest, TheDefaultsAreTheLibrarys) {
  const AccountingServiceOptions o;
  const Consumer::Options consumer;
  EXPECT_EQ(o.prefetch, consumer.prefetch);
  EXPECT_EQ(o.consume_linger_batch, consumer.linger_batch);
  EXPECT_EQ(o.processed_retention, consumer.inbox_retention);
  const std::vector<std::pair<const char*, std::string>> flags = {
      {"accounting_listen", o.listen},
      {"accounting_db", o.db},
      {"prefetch", absl::StrCat(o.prefetch)},
      {"consume_linger_ms", absl::StrCat(o.consume_linger_ms)},
      {"consume_linger_batch", absl::StrCat(o.consume_linger_batch)},
      {"accounting_shard", absl::StrCat(o.shard)},
      {"processed_retention", absl::FormatDuration(o.processed_retention)},
  };
  for (const auto& [name, value] : flags) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    ASSERT_NE(flag, nullptr) << name;
    EXPECT_EQ(flag->DefaultValue(), value) << name;
  }
}

TEST(AccountingOptionsFromFlagsTest, ReadsEveryFlag) {
  outbox::testing::ScopedFlags flags;
  flags.Set("amqp_url", "amqp://guest@127.0.0.1:5672/%2F");  // the shared flags' one requirement
  flags.Set("allow_unsigned_messages", "true");
  flags.Set("accounting_shards", "2");
  flags.Set("accounting_listen", "127.0.0.1:0");
  flags.Set("accounting_db", "/tmp/a.db");
  flags.Set("metrics_listen", "127.0.0.1:9101");
  flags.Set("prefetch", "7");
  flags.Set("consume_linger_ms", "9");
  flags.Set("consume_linger_batch", "3");
  flags.Set("accounting_shard", "1");
  flags.Set("processed_retention", "1h");
  flags.Set("reply_queues", "ACC_QUEUE.s0,,ACC_QUEUE.s1");
  absl::StatusOr<AccountingServiceOptions> o = OptionsFromFlags();
  ASSERT_OK(o);
  EXPECT_EQ(o->listen, "127.0.0.1:0");
  EXPECT_EQ(o->db, "/tmp/a.db");
  EXPECT_EQ(o->metrics_listen, "127.0.0.1:9101");
  EXPECT_EQ(o->prefetch, 7);
  EXPECT_EQ(o->consume_linger_ms, 9);
  EXPECT_EQ(o->consume_linger_batch, 3);
  EXPECT_EQ(o->shard, 1);
  EXPECT_EQ(o->processed_retention, absl::Hours(1));
  EXPECT_EQ(o->reply_queues, (std::vector<std::string>{"ACC_QUEUE.s0", "ACC_QUEUE.s1"}));
  EXPECT_EQ(o->service.accounting_shards, 2);
  EXPECT_FALSE(o->auth.enabled());
  EXPECT_OK(o->Validate());
}

}  // namespace
}  // namespace outbox::accounting
