// The standby takes over under load, through the services: two
// payment_service replicas on one database, accounting_service and
// recovery_service, every one on the two-host URI of a primary of
// scripts/postgres_node.sh and its synchronous standby (remote_apply,
// target_session_attrs=read-write). Clients with the service config
// docs/api.md documents (client/channel.h) create payments on both replicas
// in turn, and ask again with the same key until a create is answered OK.
// Under that load the primary is SIGKILLed and the standby promoted; the
// services reconnect by themselves.
//
// Asserted: every create is answered OK in the end (a retry answers every
// failure); every payment so answered is there once, with its amount, SENT,
// with exactly one voucher of that amount; nothing is FAILED or stuck.
// Printed, not asserted (the machine decides them): creates answered, calls
// that failed and their codes, how long calls failed (the first failed call
// to the last), and the time from the kill until every row is SENT.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/channel.h"
#include "shared/testing/pg_servers.h"
#include "tests/support/services.h"

namespace outbox::testing {
namespace {

using ::payment::v1::CreatePaymentRequest;
using ::payment::v1::CreatePaymentResponse;

constexpr int kClients = 8;

// What the clients saw, under one mutex.
struct Ledger {
  std::mutex mu;
  std::map<std::string, int64_t> amounts;   // key -> amount, once answered OK
  std::map<std::string, std::string> ids;   // key -> payment id
  std::map<std::string, int> failed_codes;  // gRPC code name -> calls
  absl::Time first_failure = absl::InfiniteFuture();
  absl::Time last_failure = absl::InfinitePast();
  int unanswered = 0;                             // keys never answered OK within their deadline
  absl::Duration longest = absl::ZeroDuration();  // a create's first call to its answer
  absl::Time longest_began;
  int after_kill = 0;  // creates answered OK that began after the kill
};

class PgFailoverTest : public ::testing::Test {
 protected:
  // Creates `key` with `amount` on `stub`, asking again with the same key
  // after each failure, until OK or a minute has passed.
  void CreateUntilAnswered(::payment::v1::PaymentService::Stub& stub, const std::string& key,
                           int64_t amount, Ledger& ledger) {
    CreatePaymentRequest req;
    req.set_idempotency_key(key);
    req.set_payer_account("acct-alice");
    req.set_payee_account("acct-bob");
    req.set_amount_minor(amount);
    req.set_currency("EUR");
    req.set_description("failover");
    const absl::Time began = absl::Now();
    const absl::Time give_up = began + absl::Minutes(1);
    while (absl::Now() < give_up) {
      grpc::ClientContext ctx;
      client::SetTimeout(&ctx, absl::Seconds(10));
      CreatePaymentResponse resp;
      const grpc::Status status = stub.CreatePayment(&ctx, req, &resp);
      std::lock_guard<std::mutex> lock(ledger.mu);
      if (status.ok()) {
        if (absl::Now() - began > ledger.longest) {
          ledger.longest = absl::Now() - began;
          ledger.longest_began = began;
        }
        ledger.after_kill += began > killed_;
        ledger.amounts[key] = amount;
        ledger.ids[key] = resp.payment().payment_id();
        return;
      }
      const absl::Time now = absl::Now();
      ledger.first_failure = std::min(ledger.first_failure, now);
      ledger.last_failure = std::max(ledger.last_failure, now);
      ++ledger.failed_codes[absl::StatusCodeToString(
          static_cast<absl::StatusCode>(status.error_code()))];
    }
    std::lock_guard<std::mutex> lock(ledger.mu);
    ++ledger.unanswered;
  }

  absl::Time killed_ = absl::InfiniteFuture();  // set before the kill, read by the clients
};

TEST_F(PgFailoverTest, TheStandbyTakesOverUnderLoadAndNothingIsLostOrBookedTwice) {
  PgServers servers("e2e_pg_failover", PgServers::kWithStandby);
  ASSERT_TRUE(servers.ok());
  ASSERT_FALSE(FreshPgDatabase(servers.url(), "pay").empty());
  ASSERT_FALSE(FreshPgDatabase(servers.url(), "acc").empty());
  const std::string both = servers.FailoverUrl();
  ASSERT_NE(both.find("target_session_attrs=read-write"), std::string::npos) << both;
  const std::string pay = PgUrlOfDatabase(both, "pay");
  const std::string acc = PgUrlOfDatabase(both, "acc");

  ServiceSet services(Env{{"PAYMENT_DB", pay},
                          {"ACCOUNTING_DB", acc},
                          {"PGPASSFILE", servers.pgpass()},
                          {"RECOVERY_BASE_DELAY", "5s"}});
  services.StartAll();
  services.StartRecovery("r1");
  // The second replica: the same settings, a port of its own.
  Process replica;
  Env env = services.ServiceEnv("outbox-payment");
  env["PAYMENT_LISTEN"] = "127.0.0.1:0";
  replica.Start(BinaryPath("payment_service"), {}, env, services.dir() + "/payment_2.log");
  const std::string started = replica.WaitForLog("payment_service_started", absl::Seconds(30));
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(LogField(started, "payment_service_started", "port"), &port))
      << replica.Log();
  std::vector<std::unique_ptr<::payment::v1::PaymentService::Stub>> stubs;
  for (int p : {services.payment_port(), port}) {
    stubs.push_back(
        ::payment::v1::PaymentService::NewStub(client::NewChannel(absl::StrCat("127.0.0.1:", p))));
  }

  Ledger ledger;
  std::atomic<bool> stop{false};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; !stop.load(); ++i) {
        CreateUntilAnswered(*stubs[static_cast<size_t>(i % 2)], absl::StrCat("k-", c, "-", i),
                            100 + i, ledger);
      }
    });
  }
  absl::SleepFor(absl::Seconds(3));
  const absl::Time killed = absl::Now();
  {
    std::lock_guard<std::mutex> lock(ledger.mu);
    killed_ = killed;
  }
  ASSERT_TRUE(PgServers::Kill(servers.primary()));
  ASSERT_TRUE(PgServers::Promote(servers.standby()));
  absl::SleepFor(absl::Seconds(5));
  stop = true;
  for (std::thread& t : clients) t.join();

  // Every answered payment SENT with one voucher: through the services.
  std::vector<::payment::v1::Payment> payments;
  std::vector<::accounting::v1::Voucher> vouchers;
  const size_t answered = ledger.amounts.size();
  absl::Time all_sent = absl::InfiniteFuture();
  const absl::Time deadline = absl::Now() + absl::Minutes(2);
  while (absl::Now() < deadline) {
    payments = services.AllPayments();
    vouchers = services.AllVouchers();
    const bool sent = std::all_of(payments.begin(), payments.end(), [](const auto& p) {
      return p.outbox().status() == ::payment::v1::SENT;
    });
    if (sent && payments.size() >= answered && vouchers.size() >= payments.size()) {
      all_sent = absl::Now();
      break;
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  EXPECT_EQ(ledger.unanswered, 0) << "creates a minute of retries did not answer";
  ASSERT_NE(all_sent, absl::InfiniteFuture()) << "rows still not SENT, or vouchers missing";
  std::map<std::string, const ::payment::v1::Payment*> by_key;
  for (const auto& p : payments) {
    EXPECT_TRUE(by_key.emplace(p.idempotency_key(), &p).second) << "two payments of one key";
  }
  std::map<std::string, std::vector<int64_t>> booked;  // payment id -> voucher amounts
  for (const auto& v : vouchers) booked[v.payment_id()].push_back(v.amount_minor());
  int lost = 0;
  int dups = 0;
  for (const auto& [key, amount] : ledger.amounts) {
    auto it = by_key.find(key);
    if (it == by_key.end() || it->second->amount_minor() != amount ||
        it->second->payment_id() != ledger.ids[key]) {
      ++lost;
      ADD_FAILURE() << key << ": answered OK, missing or changed";
      continue;
    }
    const auto& amounts = booked[ledger.ids[key]];
    if (amounts.size() != 1 || amounts[0] != amount) {
      ++dups;
      ADD_FAILURE() << key << ": " << amounts.size() << " vouchers";
    }
  }
  EXPECT_EQ(payments.size(), answered) << "payments nobody was answered for";
  EXPECT_EQ(vouchers.size(), payments.size());

  std::string codes;
  for (const auto& [code, n] : ledger.failed_codes) absl::StrAppend(&codes, code, "=", n, " ");
  const bool any_failed = ledger.first_failure != absl::InfiniteFuture();
  printf(
      "failover through the services: %zu creates answered OK on 2 replicas (%d begun after "
      "the kill), lost %d, booked twice %d; the longest create took %s, begun %s after the "
      "kill; calls failed: %s(%s); all SENT with vouchers %.2f s after the kill, the load "
      "having run 5 s past it\n",
      answered, ledger.after_kill, lost, dups, absl::FormatDuration(ledger.longest).c_str(),
      absl::FormatDuration(ledger.longest_began - killed).c_str(),
      codes.empty() ? "none " : codes.c_str(),
      any_failed
          ? absl::StrCat("for ", absl::FormatDuration(ledger.last_failure - ledger.first_failure),
                         ", from ", absl::FormatDuration(ledger.first_failure - killed),
                         " after the kill")
                .c_str()
          : "none",
      absl::ToDoubleSeconds(all_sent - killed));
  replica.Terminate();
}

}  // namespace
}  // namespace outbox::testing
