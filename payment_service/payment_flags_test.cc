#include "payment_service/payment_flags.h"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "shared/testing/scoped_flags.h"

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "shared/testing/status_matchers.h"

namespace outbox::payment {
namespace {

void ExpectRefused(const PaymentServiceOptions& options, const std::string& message) {
  absl::Status status = options.Validate();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(status.message(), message);
}

constexpr char kWindowBatchPrefetch[] =
    "--publish_window and --group_commit_max must be positive; --prefetch 1..65535";
constexpr char kUnsentHold[] =
    "--max_unsent must be >= 0; --max_hold_ms and --ack_linger_ms 0..1000";

TEST(PaymentServiceOptionsTest, AcceptsTheDefaults) {
  EXPECT_OK(PaymentServiceOptions{}.Validate());
}

TEST(PaymentServiceOptionsTest, AcceptsTheBounds) {
  PaymentServiceOptions o;
  o.publish_window = 1;
  o.group_commit_max = 1;
  o.prefetch = 1;
  o.max_unsent = 0;  // backpressure off
  o.max_hold_ms = 0;
  EXPECT_OK(o.Validate());
  o.prefetch = 65535;
  o.max_hold_ms = 1000;
  EXPECT_OK(o.Validate());
}

TEST(PaymentServiceOptionsTest, RefusesAPublishWindowBelowOne) {
  for (int window : {0, -1}) {
    PaymentServiceOptions o;
    o.publish_window = window;
    ExpectRefused(o, kWindowBatchPrefetch);
  }
}

TEST(PaymentServiceOptionsTest, RefusesAGroupCommitMaxBelowOne) {
  for (int max : {0, -1}) {
    PaymentServiceOptions o;
    o.group_commit_max = max;
    ExpectRefused(o, kWindowBatchPrefetch);
  }
}

TEST(PaymentServiceOptionsTest, RefusesAPrefetchOutside1To65535) {
  for (int prefetch : {0, -1, 65536}) {
    PaymentServiceOptions o;
    o.prefetch = prefetch;
    ExpectRefused(o, kWindowBatchPrefetch);
  }
}

TEST(PaymentServiceOptionsTest, RefusesANegativeMaxUnsent) {
  PaymentServiceOptions o;
  o.max_unsent = -1;
  ExpectRefused(o, kUnsentHold);
}

TEST(PaymentServiceOptionsTest, RefusesAMaxHoldOutside0To1000) {
  for (int hold_ms : {-1, 1001}) {
    PaymentServiceOptions o;
    o.max_hold_ms = hold_ms;
    ExpectRefused(o, kUnsentHold);
  }
}

TEST(PaymentServiceOptionsTest, RefusesAnAckLingerOutside0To1000) {
  for (int linger_ms : {-1, 1001}) {
    PaymentServiceOptions o;
    o.ack_linger_ms = linger_ms;
    ExpectRefused(o, kUnsentHold);
  }
}

TEST(PaymentServiceOptionsTest, TheSizesAreCheckedBeforeTheBackpressure) {
  PaymentServiceOptions o;
  o.publish_window = 0;
  o.max_hold_ms = 5000;
  ExpectRefused(o, kWindowBatchPrefetch);
}

// Each default lives once: the producer's in the library's options, which
// PaymentServiceOptions takes, and the flags take PaymentServiceOptions'.
TEST(PaymentOptionsFromFlagsTest, TheDefaultsAreTheLibrarys) {
  const PaymentServiceOptions o;
  const GroupWriterOptions group;
  EXPECT_EQ(o.publish_window, static_cast<int>(Producer::Options{}.window));
  EXPECT_EQ(o.group_commit_max, static_cast<int>(group.max_batch));
  EXPECT_EQ(o.max_unsent, group.max_unsent);
  EXPECT_EQ(absl::Milliseconds(o.max_hold_ms), group.max_hold);
  EXPECT_EQ(absl::Milliseconds(o.ack_linger_ms), group.ack_linger);
  const std::vector<std::pair<const char*, std::string>> flags = {
      {"payment_listen", o.listen},
      {"payment_db", o.db},
      {"publish_window", absl::StrCat(o.publish_window)},
      {"prefetch", absl::StrCat(o.prefetch)},
      {"group_commit_max", absl::StrCat(o.group_commit_max)},
      {"max_unsent", absl::StrCat(o.max_unsent)},
      {"max_hold_ms", absl::StrCat(o.max_hold_ms)},
      {"ack_linger_ms", absl::StrCat(o.ack_linger_ms)},
  };
  for (const auto& [name, value] : flags) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    ASSERT_NE(flag, nullptr) << name;
    EXPECT_EQ(flag->DefaultValue(), value) << name;
  }
}

TEST(PaymentOptionsFromFlagsTest, ReadsEveryFlag) {
  outbox::testing::ScopedFlags flags;
  flags.Set("amqp_url", "amqp://guest@127.0.0.1:5672/%2F");  // the shared flags' one requirement
  flags.Set("allow_unsigned_messages", "true");
  flags.Set("pay_queue", "P1");
  flags.Set("payment_listen", "127.0.0.1:0");
  flags.Set("payment_db", "/tmp/p.db");
  flags.Set("metrics_listen", "127.0.0.1:9100");
  flags.Set("publish_window", "7");
  flags.Set("prefetch", "8");
  flags.Set("group_commit_max", "9");
  flags.Set("max_unsent", "10");
  flags.Set("max_hold_ms", "11");
  flags.Set("payment_shards", "127.0.0.1:7001,127.0.0.1:7002");
  flags.Set("payment_shard_index", "1");
  absl::StatusOr<PaymentServiceOptions> o = OptionsFromFlags();
  ASSERT_OK(o);
  EXPECT_EQ(o->listen, "127.0.0.1:0");
  EXPECT_EQ(o->db, "/tmp/p.db");
  EXPECT_EQ(o->metrics_listen, "127.0.0.1:9100");
  EXPECT_EQ(o->publish_window, 7);
  EXPECT_EQ(o->prefetch, 8);
  EXPECT_EQ(o->group_commit_max, 9);
  EXPECT_EQ(o->max_unsent, 10);
  EXPECT_EQ(o->max_hold_ms, 11);
  EXPECT_EQ(o->shard.index, 1);
  EXPECT_EQ(o->shard.count(), 2);
  EXPECT_FALSE(o->auth.enabled());
  EXPECT_EQ(o->service.pay_queue, "P1");
  EXPECT_OK(o->Validate());
}

TEST(PaymentOptionsFromFlagsTest, AShardFlagThatDoesNotParseIsRefused) {
  outbox::testing::ScopedFlags flags;
  flags.Set("amqp_url", "amqp://guest@127.0.0.1:5672/%2F");
  flags.Set("allow_unsigned_messages", "true");
  flags.Set("payment_shard_index", "1");  // one shard: only index 0
  EXPECT_EQ(OptionsFromFlags().status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace outbox::payment
