// The gRPC security settings on the real binaries: TLS (and mTLS) from
// certificates made by scripts/dev_certs.sh, the ops and API bearer tokens,
// health staying open, outboxctl and --health_check speaking TLS, and the
// tokens never reaching a log. And AMQP over TLS: the three services on the
// test node's amqps listener, a broker they cannot verify, bad AMQP_TLS_*.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/channel.h"
#include "events/v1/events.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "service_kit/grpc/channel_security.h"
#include "shared/amqp/internal/amqp_client.h"
#include "shared/outbox/message_auth.h"
#include "shared/testing/status_matchers.h"
#include "tests/support/alertmanager.h"
#include "tests/support/load.h"
#include "tests/support/services.h"

namespace outbox::testing {
namespace {

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;

constexpr absl::Duration kCallTimeout = absl::Seconds(5);

std::string RandomToken() {
  std::random_device rd;
  return absl::StrFormat("%016x%016x", (uint64_t{rd()} << 32) | rd(),
                         (uint64_t{rd()} << 32) | rd());
}

std::string WriteSecret(const std::string& path, const std::string& contents) {
  std::ofstream(path) << contents << "\n";
  chmod(path.c_str(), 0600);
  return path;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A temp dir for certificates and tokens, removed with its keys at the end.
class SecretsDir {
 public:
  SecretsDir() : path_(MakeTempDir("outbox_certs")) {}
  ~SecretsDir() {
    if (std::getenv("OUTBOX_KEEP_TEST_DIRS") == nullptr) std::filesystem::remove_all(path_);
  }
  const std::string& path() const { return path_; }

 private:
  const std::string path_;
};

// scripts/dev_certs.sh into `dir`.
void MakeCerts(const std::string& dir) {
  const CommandResult r =
      RunToCompletion("/bin/bash", {absl::StrCat(OUTBOX_SOURCE_DIR, "/scripts/dev_certs.sh"), dir},
                      {}, absl::StrCat(dir, "/dev_certs"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  struct stat st = {};
  ASSERT_EQ(stat(absl::StrCat(dir, "/server.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

std::shared_ptr<grpc::Channel> Channel(int port, const TlsClientFiles& tls,
                                       const std::string& token = "") {
  auto credentials = ChannelCredentialsFrom(tls);
  EXPECT_OK(credentials);
  return CreateChannelWithToken(absl::StrCat("127.0.0.1:", port), *credentials,
                                grpc::ChannelArguments(), token);
}

template <typename Call>
grpc::StatusCode CodeOf(Call call) {
  grpc::ClientContext ctx;
  ctx.set_deadline(DeadlineIn(kCallTimeout));
  return call(&ctx).error_code();
}

grpc::StatusCode Health(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = Health::NewStub(channel);
  HealthCheckResponse resp;
  const grpc::StatusCode code = CodeOf(
      [&](grpc::ClientContext* ctx) { return stub->Check(ctx, HealthCheckRequest(), &resp); });
  if (code == grpc::StatusCode::OK && resp.status() != HealthCheckResponse::SERVING) {
    return grpc::StatusCode::FAILED_PRECONDITION;
  }
  return code;
}

grpc::StatusCode OpsStats(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = ::ops::v1::OutboxOps::NewStub(channel);
  ::ops::v1::Stats stats;
  return CodeOf([&](grpc::ClientContext* ctx) { return stub->GetStats(ctx, {}, &stats); });
}

grpc::StatusCode ListPayments(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = ::payment::v1::PaymentService::NewStub(channel);
  ::payment::v1::ListPaymentsResponse resp;
  return CodeOf([&](grpc::ClientContext* ctx) { return stub->ListPayments(ctx, {}, &resp); });
}

grpc::StatusCode ListVouchers(const std::shared_ptr<grpc::Channel>& channel) {
  auto stub = ::accounting::v1::AccountingService::NewStub(channel);
  ::accounting::v1::ListVouchersResponse resp;
  return CodeOf([&](grpc::ClientContext* ctx) { return stub->ListVouchers(ctx, {}, &resp); });
}

TEST(SecurityTest, TlsAndTokensGuardTheApisHealthStaysOpenAndNoLogShowsAToken) {
  const SecretsDir secrets;
  const std::string& certs = secrets.path();
  MakeCerts(certs);
  const std::string ops_token = RandomToken();
  const std::string api_token = RandomToken();
  const std::string ops_token_file = WriteSecret(certs + "/ops.token", ops_token);
  const std::string api_token_file = WriteSecret(certs + "/api.token", api_token);
  const std::string wrong_token_file = WriteSecret(certs + "/wrong.token", "not-the-token");
  const Env tls_env = {{"TLS_CERT_FILE", certs + "/server.pem"},
                       {"TLS_KEY_FILE", certs + "/server.key"},
                       {"TLS_CA_FILE", certs + "/ca.pem"}};
  Env env = tls_env;
  env["OPS_TOKEN_FILE"] = ops_token_file;
  env["API_TOKEN_FILE"] = api_token_file;
  ServiceSet services(env);
  services.StartAll();
  auto& recovery = services.StartRecovery("r1");
  const TlsClientFiles ca{certs + "/ca.pem", "", ""};

  // TLS with the CA works; plaintext does not reach the API, nor health.
  EXPECT_EQ(Health(Channel(recovery.port, ca)), grpc::StatusCode::OK);
  EXPECT_EQ(Health(Channel(services.payment_port(), ca)), grpc::StatusCode::OK);
  EXPECT_NE(Health(Channel(recovery.port, {})), grpc::StatusCode::OK);
  EXPECT_NE(OpsStats(Channel(recovery.port, {}, ops_token)), grpc::StatusCode::OK);

  // The ops token: missing, wrong, right.
  EXPECT_EQ(OpsStats(Channel(recovery.port, ca)), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(OpsStats(Channel(recovery.port, ca, "wrong")), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(OpsStats(Channel(recovery.port, ca, api_token)), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(OpsStats(Channel(recovery.port, ca, ops_token)), grpc::StatusCode::OK);

  // The API token on payment and accounting.
  EXPECT_EQ(ListPayments(Channel(services.payment_port(), ca)), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(ListPayments(Channel(services.payment_port(), ca, ops_token)),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(ListPayments(Channel(services.payment_port(), ca, api_token)), grpc::StatusCode::OK);
  EXPECT_EQ(ListVouchers(Channel(services.accounting_port(), ca)),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(ListVouchers(Channel(services.accounting_port(), ca, api_token)), grpc::StatusCode::OK);

  // The real outboxctl: TLS and the token file, then without the token.
  const std::string at = absl::StrCat("--recovery_addr=127.0.0.1:", recovery.port);
  auto ctl = [&](const std::vector<std::string>& args, const std::string& name) {
    CommandResult r = RunToCompletion(BinaryPath("outboxctl"), args, {},
                                      absl::StrCat(services.dir(), "/outboxctl.", name));
    std::cout << "outboxctl " << name << " -> exit " << r.exit_code << "\n" << r.out << r.err;
    return r;
  };
  const std::string tls_flag = "--tls_ca_file=" + certs + "/ca.pem";
  EXPECT_EQ(ctl({"stats", at, tls_flag, "--token_file=" + ops_token_file}, "ok").exit_code, 0);
  const CommandResult no_token = ctl({"stats", at, tls_flag}, "no_token");
  EXPECT_EQ(no_token.exit_code, 1);
  EXPECT_NE(no_token.err.find("UNAUTHENTICATED"), std::string::npos) << no_token.err;
  const CommandResult wrong =
      ctl({"stats", at, tls_flag, "--token_file=" + wrong_token_file}, "wrong");
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.err.find("PERMISSION_DENIED"), std::string::npos) << wrong.err;
  EXPECT_EQ(ctl({"stats", at, "--token_file=" + ops_token_file}, "plaintext").exit_code, 1);
  EXPECT_EQ(
      ctl({"health", absl::StrCat("127.0.0.1:", recovery.port), tls_flag}, "health").exit_code, 0);

  // The service's own --health_check probe with the same TLS settings.
  const CommandResult probe = RunToCompletion(
      BinaryPath("recovery_service"), {absl::StrCat("--health_check=127.0.0.1:", recovery.port)},
      tls_env, services.dir() + "/probe");
  EXPECT_EQ(probe.exit_code, 0) << probe.out << probe.err;

  // No token, nor a piece of one, in any log.
  for (const std::string log : {"payment_service", "accounting_service", "recovery_r1"}) {
    const std::string text = ReadAll(absl::StrCat(services.dir(), "/", log, ".log"));
    EXPECT_FALSE(text.empty()) << log;
    EXPECT_EQ(text.find(ops_token.substr(0, 8)), std::string::npos) << log;
    EXPECT_EQ(text.find(api_token.substr(0, 8)), std::string::npos) << log;
  }
}

TEST(SecurityTest, WithAClientCaOnlyClientsWithACertificateGetIn) {
  const SecretsDir secrets;
  const std::string& certs = secrets.path();
  MakeCerts(certs);
  const Env env = {{"TLS_CERT_FILE", certs + "/server.pem"},
                   {"TLS_KEY_FILE", certs + "/server.key"},
                   {"TLS_CLIENT_CA_FILE", certs + "/ca.pem"}};
  ServiceSet services(env);
  services.StartAccounting();
  const int port = services.accounting_port();
  EXPECT_NE(Health(Channel(port, {certs + "/ca.pem", "", ""})), grpc::StatusCode::OK);
  EXPECT_EQ(
      Health(Channel(port, {certs + "/ca.pem", certs + "/client.pem", certs + "/client.key"})),
      grpc::StatusCode::OK);
  EXPECT_EQ(ListVouchers(
                Channel(port, {certs + "/ca.pem", certs + "/client.pem", certs + "/client.key"})),
            grpc::StatusCode::OK);
  const CommandResult probe = RunToCompletion(BinaryPath("accounting_service"),
                                              {absl::StrCat("--health_check=127.0.0.1:", port)},
                                              env, services.dir() + "/probe");
  EXPECT_EQ(probe.exit_code, 0) << probe.out << probe.err;
}

// Forged messages from someone who can publish to the broker, with a
// client that is not ours (Debian's amqp-publish): well-formed events and
// acknowledgements published by hand, unsigned or signed with a key the
// services do not hold. Each is dead-lettered before anything is booked or
// marked, counted, and alerted (OutboxDeadLetters); the signed traffic
// around them flows as usual.
TEST(SecurityTest, HandPublishedMessagesWithoutAValidSignatureBookNothingAndAreDeadLettered) {
  ServiceSet services(Env{{"RECOVERY_HOUSEKEEPING_EVERY", "500ms"}});
  Alertmanager alertmanager(services.dir());
  const Env alerting = {{"ALERTMANAGER_URL", alertmanager.url()}};
  services.StartAccounting(alerting);
  services.StartPayment(alerting);
  services.StartRecovery("r", alerting);
  CreatePayments(services, "signed-", 3);
  ASSERT_EQ(WaitAllSent(services, 3, absl::Seconds(30)), 3);

  // Accounting down: the victim's row stays SENDING, a forged ack would close it.
  ASSERT_EQ(services.accounting().Terminate(), 0);
  const ::payment::v1::Payment victim = CreatePayments(services, "victim-", 1).at(0);
  const std::string kid = services.message_keys().signing_key_id();
  auto forger = MessageKeys::Parse(kid + " a-secret-the-services-do-not-hold-0123456789");
  ASSERT_OK(forger);
  auto publish = [&](const std::string& queue, const std::string& body, const std::string& reply_to,
                     const std::string& signature, const std::string& name) {
    const std::string body_file = absl::StrCat(services.dir(), "/", name, ".bin");
    std::ofstream(body_file, std::ios::binary) << body;
    std::string command =
        absl::StrCat("amqp-publish --url='", services.broker().amqp_url, "' -p -r '", queue, "'",
                     reply_to.empty() ? "" : " -t '" + reply_to + "'",
                     signature.empty() ? "" : " -H 'x-outbox-signature: " + signature + "'", " < '",
                     body_file, "'");
    const CommandResult r =
        RunToCompletion("/bin/bash", {"-c", command}, {}, absl::StrCat(services.dir(), "/", name));
    ASSERT_EQ(r.exit_code, 0) << command << "\n" << r.out << r.err;
  };
  auto forged_signature = [&](const std::string& body, const std::string& reply_to) {
    return forger->Sign({"", "", body, reply_to, "", "", ""});  // amqp-publish sets no message id
  };

  ::events::v1::PaymentAccounted ack;
  ack.set_message_id(victim.outbox().message_id());
  ack.set_payment_id(victim.payment_id());
  ack.set_voucher_id("forged-voucher");
  const std::string ack_body = ack.SerializeAsString();
  publish(services.acc_queue(), ack_body, "", "", "ack_unsigned");
  publish(services.acc_queue(), ack_body, "", forged_signature(ack_body, ""), "ack_forged");

  ::events::v1::PaymentCreated event;
  event.set_message_id("forged-message-1");
  event.set_payment_id("forged-payment-1");
  event.set_payer_account("payer-x");
  event.set_payee_account("payee-y");
  event.set_amount_minor(100000);
  event.set_currency("EUR");
  const std::string event_body = event.SerializeAsString();
  publish(services.pay_queue(), event_body, services.acc_queue(), "", "event_unsigned");
  publish(services.pay_queue(), event_body, services.acc_queue(),
          forged_signature(event_body, services.acc_queue()), "event_forged");

  auto url = AmqpUrl::Parse(services.broker().amqp_url);
  ASSERT_OK(url);
  auto conn = AmqpConnection::Connect(*url, "test-inspector");
  ASSERT_OK(conn);
  auto dead_letters = [&](const std::string& queue) {
    auto n = (*conn)->MessageCount(DeadLetterQueueOf(queue));
    return n.ok() ? static_cast<int>(*n) : -1;
  };
  ASSERT_TRUE(
      PollUntil([&] { return dead_letters(services.acc_queue()) == 2; }, absl::Seconds(15)));
  {
    grpc::ClientContext ctx;
    ::payment::v1::GetPaymentRequest get;
    get.set_payment_id(victim.payment_id());
    ::payment::v1::Payment now;
    ASSERT_OK(client::FromGrpc(services.payments().GetPayment(&ctx, get, &now), "GetPayment"));
    EXPECT_EQ(now.outbox().status(), ::payment::v1::SENDING)
        << "a forged acknowledgement closed a row nothing booked";
  }

  services.StartAccounting(alerting);
  ASSERT_EQ(WaitAllSent(services, 4, absl::Seconds(30)), 4);
  ASSERT_TRUE(
      PollUntil([&] { return dead_letters(services.pay_queue()) == 2; }, absl::Seconds(15)));
  {
    grpc::ClientContext ctx;
    ::accounting::v1::GetVoucherRequest get;
    get.set_payment_id("forged-payment-1");
    ::accounting::v1::Voucher v;
    EXPECT_EQ(services.accounting_api().GetVoucher(&ctx, get, &v).error_code(),
              grpc::StatusCode::NOT_FOUND)
        << "a forged event was booked";
  }
  EXPECT_EQ(services.AllVouchers().size(), 4u);
  for (Process* p : {&services.accounting(), &services.payment()}) {
    const std::string log = p->Log();
    EXPECT_NE(log.find("unsigned message"), std::string::npos) << log;
    EXPECT_NE(log.find("bad signature (key '" + kid + "')"), std::string::npos) << log;
  }
  std::string alerts;
  ASSERT_TRUE(PollUntil(
      [&] {
        alerts = alertmanager.Alerts();
        return alerts.find(services.pay_queue() + ".DLQ") != std::string::npos &&
               alerts.find(services.acc_queue() + ".DLQ") != std::string::npos;
      },
      absl::Seconds(30), absl::Milliseconds(300)))
      << alerts;
  EXPECT_NE(alerts.find("OutboxDeadLetters"), std::string::npos);
  const CheckResult check = RunChecker(services);
  EXPECT_EQ(check.exit_code, 0) << check.output;
  ASSERT_EQ(services.accounting().Terminate(), 0);
  EXPECT_NE(services.accounting().Log().find("unauthenticated=2"), std::string::npos);
}

// The node's TLS listener serves a certificate of the fixture's dev CA
// (broker().tls_dir); the services present that CA's client certificate too.
TEST(SecurityTest, TheServicesTalkToTheBrokerOverAmqps) {
  const Broker broker = TestBroker();
  const std::string& tls = broker.tls_dir;
  // The node's admin user over TLS (its password is in the URL, so no
  // per-service AMQP_PASSWORD_FILE).
  ServiceSet services(Env{{"AMQP_URL", broker.amqps_url},
                          {"AMQP_PASSWORD_FILE", ""},
                          {"AMQP_TLS_CA_FILE", tls + "/ca.pem"},
                          {"AMQP_TLS_CERT_FILE", tls + "/client.pem"},
                          {"AMQP_TLS_KEY_FILE", tls + "/client.key"},
                          {"RECOVERY_BASE_DELAY", "2s"}});
  services.StartAll();
  services.StartRecovery("r1");
  constexpr int kPayments = 20;
  CreatePayments(services, "amqps", kPayments);
  EXPECT_EQ(WaitAllSent(services, kPayments, absl::Seconds(30)), kPayments);
  std::vector<::accounting::v1::Voucher> vouchers;
  PollUntil(
      [&] {
        vouchers = services.AllVouchers();
        return vouchers.size() >= kPayments;
      },
      absl::Seconds(10));
  std::set<std::string> paid;
  for (const auto& v : vouchers) paid.insert(v.payment_id());
  EXPECT_EQ(vouchers.size(), static_cast<size_t>(kPayments));
  EXPECT_EQ(paid.size(), static_cast<size_t>(kPayments));
  // Every service connected to the amqps URL, none to another; no password in a log.
  const std::string& url = broker.amqps_url;
  const size_t at = url.find('@');
  const std::string password = url.substr(url.rfind(':', at) + 1, at - url.rfind(':', at) - 1);
  ASSERT_GE(password.size(), 16u);
  for (const std::string log : {"payment_service", "accounting_service", "recovery_r1"}) {
    const std::string text = ReadAll(absl::StrCat(services.dir(), "/", log, ".log"));
    EXPECT_NE(text.find("amqp_connected"), std::string::npos) << log << ":\n" << text;
    EXPECT_NE(text.find("url=amqps://"), std::string::npos) << log << ":\n" << text;
    EXPECT_EQ(text.find("url=amqp://"), std::string::npos) << log << ":\n" << text;
    EXPECT_EQ(text.find(password), std::string::npos) << log << " shows the broker password";
  }
}

// A broker certificate from a CA the service does not trust: the service
// keeps running (retrying under the dialer backoff, see integration.amqp_tls),
// says why in its log and stops cleanly.
TEST(SecurityTest, AnUnverifiableBrokerIsLoggedAndTheServiceKeepsRunning) {
  const SecretsDir secrets;
  MakeCerts(secrets.path());  // a CA the broker's certificate does not chain to
  const Broker broker = TestBroker();
  ServiceSet services(Env{{"AMQP_URL", broker.amqps_url},
                          {"AMQP_PASSWORD_FILE", ""},
                          {"AMQP_TLS_CA_FILE", secrets.path() + "/ca.pem"}});
  services.StartAccounting();
  const std::string log =
      services.accounting().WaitForLog("certificate verify failed", absl::Seconds(10));
  EXPECT_NE(log.find("amqp_unavailable"), std::string::npos) << services.accounting().Log();
  EXPECT_NE(log.find("TLS handshake"), std::string::npos) << log;
  EXPECT_TRUE(services.accounting().Running());
  EXPECT_EQ(services.accounting().Terminate(), 0);
}

TEST(SecurityTest, BadSecuritySettingsStopTheStartWithExit2) {
  const SecretsDir secrets;
  const std::string& certs = secrets.path();
  MakeCerts(certs);
  ServiceSet services;
  Env base = services.ServiceEnv();
  base["ACCOUNTING_LISTEN"] = "127.0.0.1:0";
  base["PAYMENT_LISTEN"] = "127.0.0.1:0";
  base["RECOVERY_LISTEN"] = "127.0.0.1:0";
  auto start = [&](const std::string& binary, Env extra, const std::string& name) {
    Env env = base;
    for (const auto& [k, v] : extra) env[k] = v;
    CommandResult r =
        RunToCompletion(BinaryPath(binary), {}, env, absl::StrCat(services.dir(), "/", name));
    std::cout << binary << " " << name << " -> exit " << r.exit_code << "\n" << r.err;
    return r;
  };
  const CommandResult no_key =
      start("accounting_service", {{"TLS_CERT_FILE", certs + "/server.pem"}}, "no_key");
  EXPECT_EQ(no_key.exit_code, 2);
  EXPECT_NE((no_key.out + no_key.err).find("tls_key_file"), std::string::npos);
  const CommandResult unreadable =
      start("accounting_service",
            {{"TLS_CERT_FILE", certs + "/server.pem"}, {"TLS_KEY_FILE", certs + "/missing.key"}},
            "unreadable");
  EXPECT_EQ(unreadable.exit_code, 2);
  EXPECT_NE((unreadable.out + unreadable.err).find("missing.key"), std::string::npos);
  const CommandResult empty_token =
      start("recovery_service", {{"OPS_TOKEN_FILE", WriteSecret(certs + "/empty.token", "")}},
            "empty_token");
  EXPECT_EQ(empty_token.exit_code, 2);
  EXPECT_NE((empty_token.out + empty_token.err).find("is empty"), std::string::npos);
  const CommandResult short_token = start(
      "recovery_service",
      {{"OPS_TOKEN_FILE", WriteSecret(certs + "/short.token", "alice guessable")}}, "short_token");
  EXPECT_EQ(short_token.exit_code, 2);
  EXPECT_NE((short_token.out + short_token.err).find("shorter than 16 characters"),
            std::string::npos);
  EXPECT_EQ((short_token.out + short_token.err).find("guessable"), std::string::npos)
      << "a token reached the log";
  // Message keys: required unless unsigned messages are allowed explicitly.
  for (const char* binary : {"payment_service", "accounting_service", "recovery_service"}) {
    const CommandResult no_keys = start(binary, {{"MESSAGE_KEYS_FILE", ""}}, "no_keys");
    EXPECT_EQ(no_keys.exit_code, 2);
    EXPECT_NE(
        (no_keys.out + no_keys.err).find("--message_keys_file (or MESSAGE_KEYS_FILE) is required"),
        std::string::npos);
  }
  const CommandResult weak_key =
      start("accounting_service",
            {{"MESSAGE_KEYS_FILE", WriteSecret(certs + "/weak.keys", "k1 too-short-secret")}},
            "weak_key");
  EXPECT_EQ(weak_key.exit_code, 2);
  EXPECT_NE((weak_key.out + weak_key.err).find("shorter than 32 bytes"), std::string::npos);
  EXPECT_EQ((weak_key.out + weak_key.err).find("too-short-secret"), std::string::npos)
      << "a secret reached the log";

  // AMQP over TLS: each bad setting exits 2 with one line naming the flag.
  const std::string amqps = services.broker().amqps_url;
  const std::string ca = certs + "/ca.pem";
  const struct {
    std::string name;
    Env env;
    std::string says;
  } bad_amqp[] = {
      {"amqps_no_ca", {{"AMQP_URL", amqps}}, "--amqp_tls_ca_file"},
      {"amqps_missing_ca",
       {{"AMQP_URL", amqps}, {"AMQP_TLS_CA_FILE", certs + "/nope.pem"}},
       "nope.pem"},
      {"amqps_cert_no_key",
       {{"AMQP_URL", amqps},
        {"AMQP_TLS_CA_FILE", ca},
        {"AMQP_TLS_CERT_FILE", certs + "/client.pem"}},
       "--amqp_tls_key_file"},
      {"amqps_missing_key",
       {{"AMQP_URL", amqps},
        {"AMQP_TLS_CA_FILE", ca},
        {"AMQP_TLS_CERT_FILE", certs + "/client.pem"},
        {"AMQP_TLS_KEY_FILE", certs + "/ops.token.missing"}},
       "--amqp_tls_key_file: cannot read"},
      {"plain_url_with_ca", {{"AMQP_TLS_CA_FILE", ca}}, "amqps://"},
  };
  for (const auto& bad : bad_amqp) {
    const CommandResult r = start("payment_service", bad.env, bad.name);
    EXPECT_EQ(r.exit_code, 2) << bad.name;
    const std::string out = r.out + r.err;
    EXPECT_NE(out.find("payment_service_failed"), std::string::npos) << bad.name << ": " << out;
    EXPECT_NE(out.find(bad.says), std::string::npos) << bad.name << ": " << out;
  }
}

}  // namespace
}  // namespace outbox::testing
