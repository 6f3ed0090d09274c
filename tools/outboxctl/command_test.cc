#include "tools/outboxctl/command.h"

#include <gtest/gtest.h>

#include <map>

#include "shared/testing/status_matchers.h"

namespace outbox::ctl {
namespace {

using ::outbox::testing::StatusIs;
using ::testing::HasSubstr;

absl::StatusOr<Command> Parse(std::vector<std::string> args,
                              std::map<std::string, std::string> env = {}) {
  return ParseCommand(args, [env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  });
}

// The usage error's message, "" when the line parsed.
std::string Error(std::vector<std::string> args) {
  auto c = Parse(std::move(args));
  if (c.ok()) return "";
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(c.status().message());
}

TEST(CommandTest, AddressesAndTimeoutComeFromFlagsThenEnvironmentThenDefaults) {
  auto c = Parse({"stats"});
  ASSERT_OK(c);
  EXPECT_EQ(c->verb, Verb::kStats);
  EXPECT_EQ(c->recovery_addr, "127.0.0.1:50053");
  EXPECT_EQ(c->payment_addr, "127.0.0.1:50051");
  EXPECT_EQ(c->accounting_addr, "127.0.0.1:50052");
  EXPECT_EQ(c->timeout, absl::Seconds(10));
  EXPECT_FALSE(c->json);

  c = Parse({"stats"}, {{"RECOVERY_ADDR", "10.0.0.1:1"}, {"OUTBOXCTL_TIMEOUT", "500ms"}});
  ASSERT_OK(c);
  EXPECT_EQ(c->recovery_addr, "10.0.0.1:1");
  EXPECT_EQ(c->timeout, absl::Milliseconds(500));

  c = Parse({"--recovery_addr=h:2", "stats", "--timeout", "2s", "--json"},
            {{"RECOVERY_ADDR", "10.0.0.1:1"}});
  ASSERT_OK(c);
  EXPECT_EQ(c->recovery_addr, "h:2");
  EXPECT_EQ(c->timeout, absl::Seconds(2));
  EXPECT_TRUE(c->json);

  EXPECT_THAT(Parse({"stats"}, {{"OUTBOXCTL_TIMEOUT", "soon"}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("OUTBOXCTL_TIMEOUT")));
}

TEST(CommandTest, EveryCommand) {
  auto c = Parse({"list", "--status=failed", "--limit", "5", "--page-size=2"});
  ASSERT_OK(c);
  EXPECT_EQ(c->verb, Verb::kList);
  EXPECT_EQ(c->status, "FAILED");
  EXPECT_EQ(c->limit, 5);
  EXPECT_EQ(c->page_size, 2);
  c = Parse({"list", "--status", "SENT"});
  ASSERT_OK(c);
  EXPECT_EQ(c->limit, kDefaultListLimit);
  EXPECT_EQ(c->page_size, 100);

  c = Parse({"get", "m-1"});
  ASSERT_OK(c);
  EXPECT_EQ(c->verb, Verb::kGet);
  EXPECT_EQ(c->arg, "m-1");

  c = Parse({"redrive", "m-1"});
  ASSERT_OK(c);
  EXPECT_EQ(c->verb, Verb::kRedrive);
  EXPECT_EQ(c->arg, "m-1");

  c = Parse({"redrive", "--all-failed", "--dry-run"});
  ASSERT_OK(c);
  EXPECT_EQ(c->verb, Verb::kRedriveAllFailed);
  EXPECT_TRUE(c->dry_run);
  c = Parse({"redrive", "--all_failed"});
  ASSERT_OK(c);
  EXPECT_FALSE(c->dry_run);

  c = Parse({"dead-letters", "list", "--queue=PAY_QUEUE", "--limit=3"});
  ASSERT_OK(c);
  EXPECT_EQ(c->verb, Verb::kDeadLettersList);
  EXPECT_EQ(c->queue, "PAY_QUEUE");
  EXPECT_EQ(c->limit, 3);
  c = Parse({"dead-letters", "redrive", "--queue", "ACC_QUEUE"});
  ASSERT_OK(c);
  EXPECT_EQ(c->verb, Verb::kDeadLettersRedrive);
  EXPECT_EQ(c->limit, 0) << "0 = all";

  c = Parse({"payment", "get", "p-1"});
  ASSERT_OK(c);
  EXPECT_EQ(c->verb, Verb::kPaymentGet);
  EXPECT_EQ(c->arg, "p-1");
  c = Parse({"payment", "create", "--idempotency_key", "order-7", "--payer=alice", "--payee=bob",
             "--amount=1250", "--currency=EUR", "--description", "first"});
  ASSERT_OK(c);
  EXPECT_EQ(c->verb, Verb::kPaymentCreate);
  EXPECT_EQ(c->payment.idempotency_key, "order-7");
  EXPECT_EQ(c->payment.payer, "alice");
  EXPECT_EQ(c->payment.payee, "bob");
  EXPECT_EQ(c->payment.amount_minor, 1250);
  EXPECT_EQ(c->payment.currency, "EUR");
  EXPECT_EQ(c->payment.description, "first");
  c = Parse({"voucher", "get", "p-1"});
  ASSERT_OK(c);
  EXPECT_EQ(c->verb, Verb::kVoucherGet);

  c = Parse({"health", "127.0.0.1:1"});
  ASSERT_OK(c);
  EXPECT_EQ(c->verb, Verb::kHealth);
  EXPECT_EQ(c->arg, "127.0.0.1:1");

  c = Parse({"redrive", "--group=0123456789ab", "--dry-run"});
  ASSERT_OK(c);
  EXPECT_EQ(c->verb, Verb::kRedriveGroup);
  EXPECT_EQ(c->group, "0123456789ab");
  EXPECT_TRUE(c->dry_run);
  c = Parse({"failures", "--kind=rejected", "--limit", "7"});
  ASSERT_OK(c);
  EXPECT_EQ(c->verb, Verb::kFailures);
  EXPECT_EQ(c->kind, "rejected");
  EXPECT_EQ(c->limit, 7);
  c = Parse({"acknowledge", "m-1"});
  ASSERT_OK(c);
  EXPECT_EQ(c->verb, Verb::kAcknowledge);
  EXPECT_EQ(c->arg, "m-1");
  c = Parse({"acknowledge", "--group", "0123456789ab"});
  ASSERT_OK(c);
  EXPECT_EQ(c->verb, Verb::kAcknowledgeGroup);
  EXPECT_FALSE(c->dry_run);
  c = Parse({"history", "p-1"});
  ASSERT_OK(c);
  EXPECT_EQ(c->verb, Verb::kHistory);
  EXPECT_EQ(c->arg, "p-1");
  c = Parse({"audit", "--limit=3"});
  ASSERT_OK(c);
  EXPECT_EQ(c->verb, Verb::kAudit);
  EXPECT_EQ(c->limit, 3);
  c = Parse({"policy"});
  ASSERT_OK(c);
  EXPECT_EQ(c->verb, Verb::kPolicy);

  // Every command that changes something takes a reason; the others do not.
  for (const std::vector<std::string>& words :
       std::vector<std::vector<std::string>>{{"redrive", "m-1"},
                                             {"redrive", "--all-failed"},
                                             {"redrive", "--group=0123456789ab", "--dry-run"},
                                             {"acknowledge", "m-1"},
                                             {"acknowledge", "--group=0123456789ab"},
                                             {"dead-letters", "redrive", "--queue=PAY_QUEUE"}}) {
    std::vector<std::string> args = words;
    args.insert(args.end(), {"--reason", "ticket 42: the rate is fixed"});
    c = Parse(args);
    ASSERT_OK(c) << words[0];
    EXPECT_EQ(c->reason, "ticket 42: the rate is fixed") << words[0];
  }
  c = Parse({"redrive", "m-1"});
  ASSERT_OK(c);
  EXPECT_EQ(c->reason, "");
  for (const std::vector<std::string>& words : std::vector<std::vector<std::string>>{
           {"list", "--status=FAILED"}, {"audit"}, {"dead-letters", "list", "--queue=PAY_QUEUE"}}) {
    std::vector<std::string> args = words;
    args.push_back("--reason=why");
    EXPECT_THAT(Parse(args).status(),
                testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                  ::testing::HasSubstr("--reason does not apply")))
        << words[0];
  }
  EXPECT_THAT(
      Parse({"failures", "--kind=odd"}).status(),
      testing::StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("--kind")));
  EXPECT_THAT(
      Parse({"redrive", "m-1", "--group=0123456789ab"}).status(),
      testing::StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("not both")));
  EXPECT_THAT(
      Parse({"acknowledge", "m-1", "--dry-run"}).status(),
      testing::StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("--dry-run")));

  // An id that starts with a dash, after "--".
  c = Parse({"get", "--", "-odd-id"});
  ASSERT_OK(c);
  EXPECT_EQ(c->arg, "-odd-id");
}

TEST(CommandTest, HelpAndVersionWinOverEverythingElse) {
  EXPECT_EQ(Parse({"--help"})->verb, Verb::kHelp);
  EXPECT_EQ(Parse({"bogus", "-h"})->verb, Verb::kHelp);
  EXPECT_EQ(Parse({"help"})->verb, Verb::kHelp);
  EXPECT_EQ(Parse({"--version", "--bogus"})->verb, Verb::kVersion);
  EXPECT_EQ(Parse({"version"})->verb, Verb::kVersion);
  EXPECT_EQ(HelpText().rfind("usage: outboxctl [flags] <command> [args]\n", 0), 0u);
}

TEST(CommandTest, UsageErrorsSayWhatIsWrong) {
  EXPECT_EQ(Error({}), "missing command");
  EXPECT_EQ(Error({"frobnicate"}), "unknown command 'frobnicate'");
  EXPECT_EQ(Error({"stats", "--bogus"}), "unknown flag --bogus");
  EXPECT_EQ(Error({"stats", "extra"}), "unexpected argument 'extra' after 'stats'");
  EXPECT_EQ(Error({"get"}), "'get' needs MESSAGE_ID");
  EXPECT_EQ(Error({"get", "a", "b"}), "unexpected argument 'b' after 'get MESSAGE_ID'");
  EXPECT_EQ(Error({"redrive"}), "'redrive' needs MESSAGE_ID (or --all-failed)");
  EXPECT_EQ(Error({"redrive", "m", "--all-failed"}),
            "redrive takes a MESSAGE_ID or --all-failed, not both");
  EXPECT_EQ(Error({"redrive", "m", "--dry-run"}),
            "--dry-run goes with redrive --all-failed, redrive --group or acknowledge --group");
  EXPECT_EQ(Error({"list"}), "'list' needs --status=FAILED, SENDING or SENT");
  EXPECT_EQ(Error({"list", "--status=LOST"}),
            "--status must be FAILED, SENDING or SENT, not 'LOST'");
  EXPECT_EQ(Error({"list", "--status=SENT", "--limit=0"}),
            "--limit must be a whole number from 1 to 1000000000, not '0'");
  EXPECT_EQ(Error({"list", "--status=SENT", "--page_size=5000"}),
            "--page_size must be a whole number from 1 to 1000, not '5000'");
  EXPECT_EQ(Error({"list", "--status"}), "--status needs a value");
  EXPECT_EQ(Error({"get", "m", "--status=SENT"}), "--status does not apply to 'get'");
  EXPECT_EQ(Error({"dead-letters"}), "'dead-letters' needs a subcommand: list or redrive");
  EXPECT_EQ(Error({"dead-letters", "peek"}),
            "unknown subcommand 'dead-letters peek'; try list or redrive");
  EXPECT_EQ(Error({"dead-letters", "list"}),
            "'dead-letters list' needs --queue=QUEUE (e.g. PAY_QUEUE)");
  EXPECT_EQ(Error({"payment"}),
            "'payment' needs a subcommand: payment get PAYMENT_ID or payment create");
  EXPECT_EQ(Error({"payment", "pay"}),
            "unknown subcommand 'payment pay'; try 'payment get PAYMENT_ID' or 'payment create'");
  EXPECT_EQ(Error({"payment", "create", "--payer=a", "--payee=b", "--amount=1", "--currency=EUR"}),
            "'payment create' needs --idempotency_key");
  EXPECT_EQ(Error({"payment", "create", "--idempotency_key=k", "--payer=a", "--payee=b",
                   "--amount=12.50", "--currency=EUR"}),
            "--amount must be a whole number of minor units (cents), not '12.50'");
  EXPECT_EQ(Error({"payment", "create", "p-1"}),
            "unexpected argument 'p-1' after 'payment create'");
  EXPECT_EQ(Error({"payment", "get", "p-1", "--payer=a"}),
            "--payer does not apply to 'payment get'");
  EXPECT_EQ(Error({"voucher", "list"}),
            "unknown subcommand 'voucher list'; try 'voucher get PAYMENT_ID'");
  EXPECT_EQ(Error({"payment", "get"}), "'payment get' needs PAYMENT_ID");
  EXPECT_EQ(Error({"health"}), "'health' needs ADDR");
  EXPECT_EQ(Error({"stats", "--json=maybe"}), "--json takes no value (or true/false), not 'maybe'");
  EXPECT_EQ(Error({"stats", "--timeout=0s"}),
            "--timeout must be a positive duration such as 500ms or 10s, not '0s'");
}

}  // namespace
}  // namespace outbox::ctl
