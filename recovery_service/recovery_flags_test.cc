#include "recovery_service/recovery_flags.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "shared/testing/scoped_flags.h"

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "shared/testing/status_matchers.h"

namespace outbox::recovery {
namespace {

// What OptionsFromFlags() gives with no flags set: the built-in defaults, the
// instance named.
RecoveryServiceOptions Defaults() {
  RecoveryServiceOptions o;
  o.worker.instance_id = "host-1";
  o.worker.watched_queues = {"PAY_QUEUE"};
  return o;
}

void ExpectRefused(const RecoveryServiceOptions& options, const std::string& message) {
  absl::Status status = options.Validate();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_EQ(status.message(), message);
}

constexpr char kWorker[] =
    "need recovery_batch >= 1, recovery_rate > 0, recovery_lease_ttl > 0, "
    "recovery_max_publish_failures >= 1 and a non-empty recovery_instance_id";

TEST(RecoveryServiceOptionsTest, AcceptsTheDefaults) {
  EXPECT_OK(Defaults().Validate());
}

TEST(RecoveryServiceOptionsTest, AcceptsTheBounds) {
  RecoveryServiceOptions o = Defaults();
  o.worker.batch = 1;
  o.worker.max_publish_failures = 1;
  o.worker.hold_queue_depth = 0;
  o.payment_db_wait = absl::ZeroDuration();  // no wait: the file is there or it is an error
  o.worker.archive_retention = absl::ZeroDuration();  // keeps every archived row
  o.worker.audit_retention = absl::ZeroDuration();    // keeps every audit record
  EXPECT_OK(o.Validate());
}

TEST(RecoveryServiceOptionsTest, RefusesANegativeArchiveOrAuditRetention) {
  for (auto bad : {&RecoveryOptions::archive_retention, &RecoveryOptions::audit_retention}) {
    RecoveryServiceOptions o = Defaults();
    o.worker.*bad = absl::Seconds(-1);
    ExpectRefused(o, "archive_retention and audit_retention must be >= 0 (0 keeps every row)");
  }
}

// Rows are archived once acknowledged `retention` ago; an archive kept no
// longer would delete each row in the pass that archives it.
TEST(RecoveryServiceOptionsTest, RefusesAnArchiveRetentionNotLongerThanTheRetention) {
  for (absl::Duration archive : {absl::Hours(24), absl::Hours(24 * 7)}) {
    RecoveryServiceOptions o = Defaults();
    o.worker.retention = absl::Hours(24 * 7);
    o.worker.archive_retention = archive;
    ExpectRefused(o, absl::StrCat("archive_retention (", absl::FormatDuration(archive),
                                  ") must be longer than retention (168h), or 0 to keep every "
                                  "archived row: rows are archived once acknowledged longer ago "
                                  "than retention, and would be deleted as soon as they are"));
  }
  RecoveryServiceOptions o = Defaults();
  o.worker.retention = absl::Hours(24 * 7);
  o.worker.archive_retention = absl::Hours(24 * 7 + 1);
  EXPECT_OK(o.Validate());
  o.worker.retention = absl::ZeroDuration();  // archived at once, kept archive_retention
  EXPECT_OK(o.Validate());
}

TEST(RecoveryServiceOptionsTest, RefusesEachBadWorkerSetting) {
  const std::vector<std::function<void(RecoveryOptions&)>> bad = {
      [](RecoveryOptions& w) { w.batch = 0; },
      [](RecoveryOptions& w) { w.rate_per_second = 0; },
      [](RecoveryOptions& w) { w.rate_per_second = -1; },
      [](RecoveryOptions& w) { w.lease_ttl = absl::ZeroDuration(); },
      [](RecoveryOptions& w) { w.max_publish_failures = 0; },
      [](RecoveryOptions& w) { w.instance_id.clear(); },
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    SCOPED_TRACE(i);
    RecoveryServiceOptions o = Defaults();
    bad[i](o.worker);
    ExpectRefused(o, kWorker);
  }
}

TEST(RecoveryServiceOptionsTest, RefusesANegativeHoldQueueDepth) {
  RecoveryServiceOptions o = Defaults();
  o.worker.hold_queue_depth = -1;
  ExpectRefused(o, "recovery_hold_queue_depth must be >= 0");
}

TEST(RecoveryServiceOptionsTest, RefusesAnAlertResendThatIsNotPositive) {
  RecoveryServiceOptions o = Defaults();
  o.worker.alert_resend = absl::ZeroDuration();
  ExpectRefused(o, "alert_resend must be positive");
}

TEST(RecoveryServiceOptionsTest, RefusesABadRetryPolicy) {
  RecoveryServiceOptions o = Defaults();
  o.worker.retry.max_attempts = 0;
  ExpectRefused(o, "retry max attempts must be at least 1");
}

TEST(RecoveryServiceOptionsTest, RefusesANegativePaymentDbWait) {
  RecoveryServiceOptions o = Defaults();
  o.payment_db_wait = absl::Seconds(-1);
  ExpectRefused(o, "--payment_db_wait must not be negative");
}

TEST(RecoveryServiceOptionsTest, ChecksTheWorkerBeforeThePaymentDbWait) {
  RecoveryServiceOptions o = Defaults();
  o.worker.batch = 0;
  o.payment_db_wait = absl::Seconds(-1);
  ExpectRefused(o, kWorker);
}

TEST(RecoveryOptionsFromFlagsTest, NamesTheInstanceWhenNoIdIsGiven) {
  outbox::testing::ScopedFlags flags;
  flags.Set("amqp_url", "amqp://guest@127.0.0.1:5672/%2F");  // the shared flags' one requirement
  flags.Set("allow_unsigned_messages", "true");
  flags.Set("recovery_instance_id", "");
  absl::StatusOr<RecoveryServiceOptions> o = OptionsFromFlags();
  ASSERT_OK(o);
  EXPECT_FALSE(o->worker.instance_id.empty());
  EXPECT_OK(o->Validate());
}

// The shared --amqp_heartbeat reaches every connection through the URL;
// AMQP counts it in whole seconds.
TEST(RecoveryOptionsFromFlagsTest, TheAmqpHeartbeatIsWholeSeconds) {
  outbox::testing::ScopedFlags flags;
  flags.Set("amqp_url", "amqp://guest@127.0.0.1:5672/%2F");
  flags.Set("allow_unsigned_messages", "true");
  EXPECT_EQ(OptionsFromFlags()->service.amqp.heartbeat, kAmqpHeartbeat);
  flags.Set("amqp_heartbeat", "7s");
  EXPECT_EQ(OptionsFromFlags()->service.amqp.heartbeat, absl::Seconds(7));
  for (const char* bad : {"2500ms", "1s", "0s", "65536s"}) {
    flags.Set("amqp_heartbeat", bad);
    absl::StatusOr<RecoveryServiceOptions> o = OptionsFromFlags();
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(o.status().message().find("--amqp_heartbeat"), std::string::npos) << o.status();
  }
}

// Each default lives once: the worker's in RecoveryOptions, the retry
// policy's in RetryPolicy, and the flags take them from there.
TEST(RecoveryOptionsFromFlagsTest, TheDefaultsAreTheLibrarys) {
  const RecoveryServiceOptions o;
  const RecoveryOptions& w = o.worker;
  const RetryPolicy retry;
  const std::vector<std::pair<const char*, std::string>> flags = {
      {"recovery_listen", o.listen},
      {"payment_db", o.payment_db},
      {"payment_db_wait", absl::FormatDuration(o.payment_db_wait)},
      {"runbook_url", o.runbook_url},
      {"recovery_batch", absl::StrCat(w.batch)},
      {"recovery_lease_ttl", absl::FormatDuration(w.lease_ttl)},
      {"recovery_rate", absl::StrCat(w.rate_per_second)},
      {"recovery_idle_sleep", absl::FormatDuration(w.idle_sleep)},
      {"recovery_max_publish_failures", absl::StrCat(w.max_publish_failures)},
      {"backlog_age", absl::FormatDuration(w.backlog_age)},
      {"backlog_threshold", absl::StrCat(w.backlog_threshold)},
      {"housekeeping_every", absl::FormatDuration(w.housekeeping_every)},
      {"recovery_hold_queue_depth", absl::StrCat(w.hold_queue_depth)},
      {"alert_resend", absl::FormatDuration(w.alert_resend)},
      {"retention", absl::FormatDuration(w.retention)},
      {"archive_retention", absl::FormatDuration(w.archive_retention)},
      {"audit_retention", absl::FormatDuration(w.audit_retention)},
      {"retry_base_delay", absl::FormatDuration(retry.base_delay)},
      {"retry_max_delay", absl::FormatDuration(retry.max_delay)},
      {"retry_max_attempts", absl::StrCat(retry.max_attempts)},
      {"retry_max_age", absl::FormatDuration(retry.max_age)},
      {"amqp_heartbeat", absl::FormatDuration(AmqpUrl{}.heartbeat)},
      {"accounting_shards", absl::StrCat(ServiceConfig{}.accounting_shards)},
      {"max_amount_minor", absl::StrCat(ServiceConfig{}.max_amount_minor)},
  };
  for (const auto& [name, value] : flags) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    ASSERT_NE(flag, nullptr) << name;
    EXPECT_EQ(flag->DefaultValue(), value) << name;
  }
}

TEST(RecoveryOptionsFromFlagsTest, ReadsEveryFlag) {
  outbox::testing::ScopedFlags flags;
  flags.Set("amqp_url", "amqp://guest@127.0.0.1:5672/%2F");
  flags.Set("allow_unsigned_messages", "true");
  flags.Set("accounting_shards", "2");
  flags.Set("recovery_listen", "127.0.0.1:0");
  flags.Set("payment_db", "/tmp/p.db");
  flags.Set("payment_db_wait", "5s");
  flags.Set("metrics_listen", "127.0.0.1:9102");
  flags.Set("runbook_url", "https://example.com/runbooks");
  flags.Set("recovery_instance_id", "r1");
  flags.Set("recovery_batch", "7");
  flags.Set("recovery_rate", "8.5");
  flags.Set("recovery_lease_ttl", "9s");
  flags.Set("recovery_idle_sleep", "2s");
  flags.Set("recovery_max_publish_failures", "4");
  flags.Set("backlog_age", "6m");
  flags.Set("backlog_threshold", "11");
  flags.Set("housekeeping_every", "12s");
  flags.Set("recovery_hold_queue_depth", "13");
  flags.Set("alert_resend", "14s");
  flags.Set("retention", "15h");
  flags.Set("archive_retention", "16h");
  flags.Set("audit_retention", "17h");
  absl::StatusOr<RecoveryServiceOptions> o = OptionsFromFlags();
  ASSERT_OK(o);
  EXPECT_EQ(o->listen, "127.0.0.1:0");
  EXPECT_EQ(o->payment_db, "/tmp/p.db");
  EXPECT_EQ(o->payment_db_wait, absl::Seconds(5));
  EXPECT_EQ(o->metrics_listen, "127.0.0.1:9102");
  EXPECT_EQ(o->runbook_url, "https://example.com/runbooks");
  const RecoveryOptions& w = o->worker;
  EXPECT_EQ(w.instance_id, "r1");
  EXPECT_EQ(w.batch, 7);
  EXPECT_EQ(w.rate_per_second, 8.5);
  EXPECT_EQ(w.lease_ttl, absl::Seconds(9));
  EXPECT_EQ(w.idle_sleep, absl::Seconds(2));
  EXPECT_EQ(w.max_publish_failures, 4);
  EXPECT_EQ(w.backlog_age, absl::Minutes(6));
  EXPECT_EQ(w.backlog_threshold, 11);
  EXPECT_EQ(w.housekeeping_every, absl::Seconds(12));
  EXPECT_EQ(w.hold_queue_depth, 13);
  EXPECT_EQ(w.alert_resend, absl::Seconds(14));
  EXPECT_EQ(w.retention, absl::Hours(15));
  EXPECT_EQ(w.archive_retention, absl::Hours(16));
  EXPECT_EQ(w.audit_retention, absl::Hours(17));
  // The queues come from the shared flags: two accounting shards.
  EXPECT_EQ(w.watched_label, "PAY_QUEUE");
  EXPECT_EQ(w.watched_queues, (std::vector<std::string>{"PAY_QUEUE-0", "PAY_QUEUE-1"}));
  EXPECT_EQ(w.dead_letter_sources,
            (std::vector<std::string>{"PAY_QUEUE-0", "PAY_QUEUE-1", "ACC_QUEUE"}));
  EXPECT_EQ(w.retry.base_delay, o->service.retry.base_delay);
  EXPECT_FALSE(o->auth.enabled());
  EXPECT_OK(o->Validate());
}

}  // namespace
}  // namespace outbox::recovery
