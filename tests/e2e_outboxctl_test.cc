// outboxctl as an operator runs it: the real binary, as a subprocess, against
// the real services on the test broker. A consumer that dead-letters
// everything turns rows FAILED within a second (2 attempts, 300 ms apart);
// the operator looks (stats, list, get, dead letters), fixes (accounting
// back, re-drive one row, move the dead letters back) and checks (payment,
// voucher, health). A fix from the rows alone leaves recovery to remove the
// settled dead letters. Exit codes: 0 done, 1 a failed call, 2 a usage error.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/channel.h"
#include "shared/testing/status_matchers.h"
#include "tests/support/queue_sink.h"
#include "tests/support/services.h"

namespace outbox::testing {
namespace {

// Runs outboxctl with the addresses of `services` in its environment.
class Ctl {
 public:
  Ctl(const std::string& dir, Env env) : dir_(dir), env_(std::move(env)) {}

  CommandResult operator()(const std::vector<std::string>& args) {
    CommandResult r = RunToCompletion(BinaryPath("outboxctl"), args, env_,
                                      absl::StrCat(dir_, "/outboxctl.", ++runs_));
    std::cout << "$ outboxctl";
    for (const std::string& a : args) std::cout << " " << a;
    std::cout << "   -> exit " << r.exit_code << "\n" << r.out << r.err;
    return r;
  }

 private:
  const std::string dir_;
  const Env env_;
  int runs_ = 0;
};

// A loopback port nothing listens on (bound, then closed).
int ClosedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The number after `"field":"` in protobuf JSON (int64 values are strings).
int64_t JsonInt(const std::string& json, const std::string& field) {
  std::smatch m;
  int64_t n = -1;
  if (std::regex_search(json, m, std::regex("\"" + field + "\":\"?([0-9]+)"))) {
    absl::SimpleAtoi(m[1].str(), &n);
  }
  return n;
}

TEST(OutboxctlTest, UsageErrorsExit2HelpAndVersionExit0AClosedPortIsUnhealthy) {
  const std::string dir = MakeTempDir("outboxctl");
  Ctl ctl(dir, {});
  for (const std::vector<std::string>& bad :
       std::vector<std::vector<std::string>>{{},
                                             {"frobnicate"},
                                             {"list"},
                                             {"list", "--status=LOST"},
                                             {"get"},
                                             {"stats", "--bogus"},
                                             {"redrive", "m", "--all-failed"},
                                             {"dead-letters", "list"},
                                             {"health"}}) {
    const CommandResult r = ctl(bad);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_EQ(r.out, "");
    EXPECT_TRUE(Contains(r.err, "\nusage: outboxctl [flags] <command> [args]")) << r.err;
  }
  const CommandResult help = ctl({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_EQ(help.out.rfind("usage: outboxctl [flags] <command> [args]\n", 0), 0u) << help.out;
  const CommandResult version = ctl({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_TRUE(std::regex_match(
      version.out, std::regex("outboxctl [0-9.]+ \\((commit [0-9a-f]{12}, )?\\w+ build\\)\n")))
      << version.out;

  const CommandResult closed = ctl({"health", absl::StrCat("127.0.0.1:", ClosedPort())});
  EXPECT_EQ(closed.exit_code, 1);
  EXPECT_EQ(closed.err.rfind("outboxctl: UNAVAILABLE: ", 0), 0u) << closed.err;
  EXPECT_EQ(std::count(closed.err.begin(), closed.err.end(), '\n'), 1) << closed.err;
}

TEST(OutboxctlTest, AnOperatorFindsFailedRowsAndDeadLettersAndRedrivesThem) {
  constexpr int kPayments = 6;
  const Env env = {{"RECOVERY_BASE_DELAY", "300ms"},
                   {"RECOVERY_MAX_DELAY", "1s"},
                   {"RECOVERY_MAX_ATTEMPTS", "2"},
                   {"RECOVERY_IDLE_SLEEP", "100ms"},
                   {"RECOVERY_HOUSEKEEPING_EVERY", "500ms"}};
  ServiceSet services(env);
  services.StartPayment();
  auto& recovery = services.StartRecovery("r1");
  auto failed_rows = [&] {
    grpc::ClientContext ctx;
    ::ops::v1::Stats stats;
    return recovery.ops->GetStats(&ctx, {}, &stats).ok() ? stats.failed() : -1;
  };
  std::vector<std::string> payment_ids, message_ids;
  {
    QueueSink sink(services.broker().amqp_url, services.pay_queue(), QueueSink::Mode::kDeadLetter);
    for (int i = 0; i < kPayments; ++i) {
      ::payment::v1::CreatePaymentRequest r;
      r.set_idempotency_key(absl::StrCat("ctl-", i));
      r.set_payer_account("payer");
      r.set_payee_account("payee");
      r.set_amount_minor(100 + i);
      r.set_currency("EUR");
      ::payment::v1::CreatePaymentResponse resp;
      grpc::ClientContext ctx;
      ASSERT_OK(
          client::FromGrpc(services.payments().CreatePayment(&ctx, r, &resp), "CreatePayment"));
      payment_ids.push_back(resp.payment().payment_id());
      message_ids.push_back(resp.payment().outbox().message_id());
    }
    ASSERT_TRUE(PollUntil([&] { return failed_rows() == kPayments; }, absl::Seconds(30)));
  }

  // RECOVERY_ADDR points at a closed port: the flag given on the line wins.
  const std::string recovery_addr = absl::StrCat("127.0.0.1:", recovery.port);
  Ctl ctl(services.dir(), {{"RECOVERY_ADDR", absl::StrCat("127.0.0.1:", ClosedPort())},
                           {"PAYMENT_ADDR", absl::StrCat("127.0.0.1:", services.payment_port())},
                           {"OUTBOXCTL_TIMEOUT", "10s"}});
  const std::string at = "--recovery_addr=" + recovery_addr;

  // Look.
  CommandResult r = ctl({"stats", at});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\nfailed +6\n"))) << r.out;
  EXPECT_TRUE(Contains(r.out, "lease_holder")) << r.out;
  r = ctl({"stats", "--json", at});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(JsonInt(r.out, "failed"), kPayments) << r.out;
  EXPECT_EQ(JsonInt(r.out, "sent"), 0) << r.out;

  r = ctl({"list", "--status=FAILED", "--page_size=4", at});  // two calls
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string& id : message_ids) EXPECT_TRUE(Contains(r.out, id)) << id;
  EXPECT_TRUE(Contains(r.out, "6 FAILED row(s)\n")) << r.out;
  EXPECT_TRUE(Contains(r.out, "MESSAGE_ID")) << r.out;
  r = ctl({"list", "--status", "failed", "--limit", "2", at});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "2 FAILED row(s); more remain")) << r.out;
  r = ctl({"list", "--status=SENT", "--json", at});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "\"messages\":[]")) << r.out;

  r = ctl({"get", message_ids[0], at});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\nstatus +FAILED\n"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\nattempts +2 of 2\n"))) << r.out;
  // The payment's trace, for one grep over the three services' logs.
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\ntrace_id +[0-9a-f]{32}\n"))) << r.out;
  r = ctl({"get", message_ids[0], "--json", at});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "\"message_id\":\"" + message_ids[0] + "\"")) << r.out;
  EXPECT_TRUE(Contains(r.out, "\"status\":\"FAILED\"")) << r.out;
  r = ctl({"get", "no-such-message", at});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err.rfind("outboxctl: NOT_FOUND: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  r = ctl({"stats"});  // the environment's address: nothing listens there
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("outboxctl: UNAVAILABLE: ", 0), 0u) << r.err;

  r = ctl({"redrive", "--all-failed", "--dry-run", at});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "6 FAILED row(s) would be re-driven (dry run)\n");
  EXPECT_EQ(failed_rows(), kPayments) << "a dry run changes nothing";

  r = ctl({"dead-letters", "list", "--queue=" + services.pay_queue(), "--json", at});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const int64_t parked = JsonInt(r.out, "total");
  EXPECT_GE(parked, 2 * kPayments) << "both attempts of each row were dead-lettered: " << r.out;
  r = ctl({"dead-letters", "list", "--queue", services.pay_queue(), "--limit=3", at});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, absl::StrCat(parked, " message(s) dead-lettered from ",
                                           services.pay_queue(), ", 3 shown\n")))
      << r.out;
  r = ctl({"dead-letters", "list", "--queue=NO_SUCH_QUEUE", at});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("outboxctl: INVALID_ARGUMENT: ", 0), 0u) << r.err;

  // Fix: accounting takes over, one row is re-driven by hand, the dead
  // letters go back to their queue (accounting books them; the late
  // acknowledgements close the other FAILED rows).
  services.StartAccounting();
  Ctl with_accounting(
      services.dir(),
      {{"RECOVERY_ADDR", recovery_addr},
       {"PAYMENT_ADDR", absl::StrCat("127.0.0.1:", services.payment_port())},
       {"ACCOUNTING_ADDR", absl::StrCat("127.0.0.1:", services.accounting_port())}});
  r = with_accounting({"redrive", message_ids[0]});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\nstatus +SENDING\n"))) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\nattempts +0 of 2\n"))) << r.out;
  r = with_accounting({"redrive", message_ids[0]});  // no longer FAILED
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("outboxctl: FAILED_PRECONDITION: ", 0), 0u) << r.err;

  r = with_accounting({"dead-letters", "redrive", "--queue=" + services.pay_queue()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, " dead-lettered message(s) moved back to " + services.pay_queue()))
      << r.out;
  ASSERT_TRUE(PollUntil(
      [&] {
        const CommandResult s = with_accounting({"stats", "--json"});
        return s.exit_code == 0 && JsonInt(s.out, "sent") == kPayments;
      },
      absl::Seconds(30), absl::Milliseconds(500)));
  r = with_accounting({"redrive", "--all-failed"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "0 FAILED row(s) re-driven to SENDING\n");
  r = with_accounting({"dead-letters", "list", "--queue=" + services.pay_queue(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(JsonInt(r.out, "total"), 0) << r.out;

  // Check: the payment is SENT and has its voucher; every server is SERVING.
  r = with_accounting({"payment", "get", payment_ids[0]});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, payment_ids[0])) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\noutbox.status +SENT\n"))) << r.out;
  r = with_accounting({"payment", "get", "no-such-payment"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("outboxctl: NOT_FOUND: ", 0), 0u) << r.err;
  r = with_accounting({"voucher", "get", payment_ids[0], "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "\"payment_id\":\"" + payment_ids[0] + "\"")) << r.out;
  EXPECT_TRUE(Contains(r.out, "\"message_id\":\"" + message_ids[0] + "\"")) << r.out;
  r = with_accounting({"voucher", "get", payment_ids[1]});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(std::regex_search(r.out, std::regex("\namount_minor +101\n"))) << r.out;
  r = with_accounting({"voucher", "get", "no-such-payment"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("outboxctl: NOT_FOUND: ", 0), 0u) << r.err;

  // A payment made with outboxctl is booked; the same key and request again
  // replays it; the same key with another amount is refused; bad input gets
  // the service's INVALID_ARGUMENT.
  const std::vector<std::string> create = {
      "payment",        "create",      "--idempotency_key=by-hand-1",
      "--payer=alice",  "--payee=bob", "--amount=1250",
      "--currency=EUR", "--json"};
  r = with_accounting(create);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(Contains(r.out, "\"replayed\":true")) << r.out;
  std::smatch id;
  ASSERT_TRUE(std::regex_search(r.out, id, std::regex("\"payment_id\":\"([^\"]+)\""))) << r.out;
  const std::string made = id[1];
  const auto booked = [&] { return with_accounting({"voucher", "get", made}).exit_code == 0; };
  ASSERT_TRUE(PollUntil(booked, absl::Seconds(30), absl::Milliseconds(200)));
  r = with_accounting(create);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "\"replayed\":true")) << r.out;
  EXPECT_TRUE(Contains(r.out, made)) << r.out;
  std::vector<std::string> other = create;
  other[5] = "--amount=999";
  r = with_accounting(other);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("outboxctl: ", 0), 0u) << r.err;
  r = with_accounting({"payment", "create", "--idempotency_key=by-hand-2", "--payer=alice",
                       "--payee=alice", "--amount=5", "--currency=EUR"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("outboxctl: INVALID_ARGUMENT: ", 0), 0u) << r.err;

  for (int port : {services.payment_port(), services.accounting_port(), recovery.port}) {
    r = with_accounting({"health", absl::StrCat("127.0.0.1:", port)});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out, absl::StrCat("127.0.0.1:", port, "  SERVING\n"));
  }
  r = with_accounting({"health", recovery_addr, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "\"status\":\"SERVING\"")) << r.out;
}

// A fix made from the rows (`redrive --all-failed`) leaves the dead letters
// of the first attempts behind; once the rows are SENT recovery removes
// them, audited, and the dead-letter queue ends empty with no purge.
TEST(OutboxctlTest, SettledDeadLettersLeaveTheQueueOnceTheirRowsAreSent) {
  constexpr int kPayments = 3;
  const Env env = {{"RECOVERY_BASE_DELAY", "300ms"},
                   {"RECOVERY_MAX_DELAY", "1s"},
                   {"RECOVERY_MAX_ATTEMPTS", "2"},
                   {"RECOVERY_IDLE_SLEEP", "100ms"},
                   {"RECOVERY_HOUSEKEEPING_EVERY", "500ms"}};
  ServiceSet services(env);
  services.StartPayment();
  auto& recovery = services.StartRecovery("r1");
  const std::string at = absl::StrCat("--recovery_addr=127.0.0.1:", recovery.port);
  Ctl ctl(services.dir(), {{"OUTBOXCTL_TIMEOUT", "10s"}});
  auto stat = [&](const std::string& field) {
    const CommandResult s = ctl({"stats", "--json", at});
    return s.exit_code == 0 ? JsonInt(s.out, field) : -1;
  };
  auto parked = [&] {
    const CommandResult l =
        ctl({"dead-letters", "list", "--queue=" + services.pay_queue(), "--limit=1", "--json", at});
    return l.exit_code == 0 ? JsonInt(l.out, "total") : -1;
  };
  {
    QueueSink sink(services.broker().amqp_url, services.pay_queue(), QueueSink::Mode::kDeadLetter);
    for (int i = 0; i < kPayments; ++i) {
      ::payment::v1::CreatePaymentRequest r;
      r.set_idempotency_key(absl::StrCat("settled-", i));
      r.set_payer_account("payer");
      r.set_payee_account("payee");
      r.set_amount_minor(100 + i);
      r.set_currency("EUR");
      ::payment::v1::CreatePaymentResponse resp;
      grpc::ClientContext ctx;
      ASSERT_OK(
          client::FromGrpc(services.payments().CreatePayment(&ctx, r, &resp), "CreatePayment"));
    }
    ASSERT_TRUE(PollUntil([&] { return stat("failed") == kPayments; }, absl::Seconds(30),
                          absl::Milliseconds(300)));
  }
  const int64_t copies = parked();
  EXPECT_GE(copies, 2 * kPayments) << "both attempts of each row were dead-lettered";

  // FAILED rows' copies are not settled: they stay while the rows stay FAILED.
  CommandResult r = ctl({"audit", "--json", at});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(Contains(r.out, "remove_settled_dead_letter")) << r.out;
  EXPECT_GE(parked(), copies);

  services.StartAccounting();
  r = ctl({"redrive", "--all-failed", at});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_TRUE(PollUntil([&] { return stat("sent") == kPayments && parked() == 0; },
                        absl::Seconds(30), absl::Milliseconds(500)));

  r = ctl({"audit", "--json", at});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string removal = R"("actor":"recovery","action":"remove_settled_dead_letter")";
  int removals = 0;
  for (size_t p = r.out.find(removal); p != std::string::npos; p = r.out.find(removal, p + 1)) {
    ++removals;
  }
  EXPECT_GE(removals, copies) << r.out;  // a copy still in flight when counted goes too
}

}  // namespace
}  // namespace outbox::testing
