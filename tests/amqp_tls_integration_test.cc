// AMQP over TLS (amqps://) against the test run's RabbitMQ node, whose TLS
// listener serves a dev certificate for 127.0.0.1 and localhost: the right
// CA works, a wrong CA, a host the certificate does not name and a plaintext
// client on the TLS port all fail, and a failing handshake goes through the
// dialer's reconnect backoff.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "shared/amqp/internal/amqp_client.h"
#include "shared/amqp/internal/amqp_dialer.h"
#include "shared/testing/manual_clock.h"
#include "shared/testing/status_matchers.h"
#include "tests/support/broker.h"
#include "tests/support/process.h"

namespace outbox {
namespace {

using ::outbox::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

// A second, unrelated dev PKI (scripts/dev_certs.sh), made once per run.
class AmqpTlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    other_pki_ = new std::string(testing::MakeTempDir("outbox_other_pki"));
    const testing::CommandResult r = testing::RunToCompletion(
        "/bin/bash", {absl::StrCat(OUTBOX_SOURCE_DIR, "/scripts/dev_certs.sh"), *other_pki_}, {},
        *other_pki_ + "/dev_certs");
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*other_pki_);
    delete other_pki_;
  }

  void SetUp() override {
    broker_ = testing::TestBroker();
    ca_ = broker_.tls_dir + "/ca.pem";
    queue_ = testing::UniqueName("tls");
  }
  void TearDown() override {
    auto url = AmqpUrl::Parse(broker_.amqp_url);
    if (!url.ok()) return;
    auto admin = AmqpConnection::Connect(*url, "tls-test-cleanup");
    if (!admin.ok()) return;
    (*admin)->DeleteQueue(queue_).IgnoreError();
    (*admin)->DeleteQueue(Topology::DeadLetterQueue(queue_)).IgnoreError();
  }

  // The node's amqps URL with its host replaced, and these TLS files.
  AmqpUrl Tls(AmqpTlsFiles files, const std::string& host = "127.0.0.1") {
    auto url =
        AmqpUrl::Parse(absl::StrReplaceAll(broker_.amqps_url, {{"@127.0.0.1:", "@" + host + ":"}}),
                       std::move(files));
    EXPECT_OK(url);
    return url.ok() ? *url : AmqpUrl();
  }
  static std::string Other(const std::string& file) { return *other_pki_ + "/" + file; }

  static std::string* other_pki_;
  testing::Broker broker_;
  std::string ca_;
  std::string queue_;
};
std::string* AmqpTlsTest::other_pki_ = nullptr;

TEST_F(AmqpTlsTest, PublishAndConsumeOverAmqpsWithTheRightCa) {
  const AmqpUrl url = Tls({ca_, "", ""});
  ASSERT_TRUE(url.tls);
  EXPECT_EQ(url.Redacted().rfind("amqps://", 0), 0u) << url.Redacted();
  auto pub = AmqpConnection::Connect(url, "tls-pub");
  ASSERT_OK(pub);
  ASSERT_OK((*pub)->DeclareQueue(queue_, ""));
  ASSERT_OK((*pub)->EnableConfirms());
  std::vector<OutgoingMessage> messages;
  for (int i = 0; i < 200; ++i) {
    messages.push_back({queue_, absl::StrCat("m", i), absl::StrCat("body-", i), "", "T"});
  }
  auto confirmed = (*pub)->PublishConfirmed(messages, absl::Seconds(10));
  ASSERT_OK(confirmed);
  for (bool c : *confirmed) ASSERT_TRUE(c);

  auto sub = AmqpConnection::Connect(url, "tls-sub");
  ASSERT_OK(sub);
  ASSERT_OK((*sub)->Consume(queue_, 64));
  std::vector<Delivery> got;
  ASSERT_TRUE(testing::PollUntil(
      [&] {
        auto batch = (*sub)->NextDeliveries(64, absl::Milliseconds(200));
        EXPECT_OK(batch);
        if (!batch.ok()) return true;
        for (Delivery& d : *batch) {
          EXPECT_OK((*sub)->Ack(d.delivery_tag, false));
          got.push_back(std::move(d));
        }
        return got.size() >= messages.size();
      },
      absl::Seconds(20)));
  ASSERT_EQ(got.size(), messages.size());
  EXPECT_EQ(got.front().body, "body-0");
  EXPECT_EQ(got.back().message_id, "m199");

  // Names are verified as well as addresses: the certificate has DNS:localhost.
  auto by_name = AmqpConnection::Connect(Tls({ca_, "", ""}, "localhost"), "tls-by-name");
  EXPECT_OK(by_name);
}

TEST_F(AmqpTlsTest, ABrokerCertificateFromAnotherCaIsRefused) {
  auto c = AmqpConnection::Connect(Tls({Other("ca.pem"), "", ""}), "tls-wrong-ca");
  ASSERT_THAT(c,
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("TLS handshake"), HasSubstr("certificate verify failed"))));
  std::cout << "wrong CA: " << c.status() << "\n";
}

// What a CA rotation relies on: a bundle with another CA and the broker's.
TEST_F(AmqpTlsTest, ACaBundleWithTheBrokersCaAmongOthersWorks) {
  const std::string bundle = Other("bundle.pem");
  {
    std::ofstream out(bundle);
    out << std::ifstream(Other("ca.pem")).rdbuf() << std::ifstream(ca_).rdbuf();
  }
  auto c = AmqpConnection::Connect(Tls({bundle, "", ""}), "tls-ca-bundle");
  EXPECT_OK(c);
}

// 127.0.0.2 reaches the same TLS listener (rabbitmq_node.sh listens there
// too), but the certificate names only 127.0.0.1 and localhost.
TEST_F(AmqpTlsTest, AHostTheCertificateDoesNotNameIsRefused) {
  auto c = AmqpConnection::Connect(Tls({ca_, "", ""}, "127.0.0.2"), "tls-wrong-host");
  ASSERT_THAT(c, StatusIs(absl::StatusCode::kUnavailable,
                          HasSubstr("certificate verify failed: IP address mismatch")));
  std::cout << "wrong host: " << c.status() << "\n";
}

TEST_F(AmqpTlsTest, PlaintextAndTlsDoNotMixUpPorts) {
  const AmqpUrl tls = Tls({ca_, "", ""});
  AmqpUrl plain_on_tls_port = *AmqpUrl::Parse(broker_.amqp_url);
  plain_on_tls_port.port = tls.port;
  const absl::Time start = absl::Now();
  auto c = AmqpConnection::Connect(plain_on_tls_port, "plain-on-tls", absl::Seconds(5));
  ASSERT_THAT(c, StatusIs(absl::StatusCode::kUnavailable));
  std::cout << "plaintext client on the TLS port: " << c.status() << "\n";
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));

  AmqpUrl tls_on_plain_port = tls;
  tls_on_plain_port.port = AmqpUrl::Parse(broker_.amqp_url)->port;
  c = AmqpConnection::Connect(tls_on_plain_port, "tls-on-plain", absl::Seconds(5));
  ASSERT_THAT(c, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("TLS handshake")));
  std::cout << "TLS client on the plaintext port: " << c.status() << "\n";
}

// The node verifies a client certificate when one is presented. Under TLS
// 1.3 it refuses one after the client has finished its handshake, so the
// refusal shows at login ("a SSL error occurred").
TEST_F(AmqpTlsTest, AClientCertificateIsPresentedAndChecked) {
  const std::string dir = broker_.tls_dir;
  auto mine = AmqpConnection::Connect(Tls({ca_, dir + "/client.pem", dir + "/client.key"}),
                                      "tls-client-cert");
  EXPECT_OK(mine);

  auto foreign = AmqpUrl::Parse(broker_.amqps_url, {ca_, Other("client.pem"), Other("client.key")});
  ASSERT_OK(foreign);
  auto refused = AmqpConnection::Connect(*foreign, "tls-foreign-client-cert");
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("SSL")));
  std::cout << "client certificate from another CA: " << refused.status() << "\n";

  // Loaded once up front: a certificate with another one's key stops the start.
  auto mismatched =
      AmqpUrl::Parse(broker_.amqps_url, {ca_, dir + "/client.pem", Other("client.key")});
  EXPECT_THAT(mismatched,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--amqp_tls_key_file")));
  std::cout << "mismatched key: " << mismatched.status() << "\n";
}

// A dialer whose handshake fails logs it and waits out the backoff before
// the next attempt: no busy loop, no crash.
TEST_F(AmqpTlsTest, AFailingHandshakeGoesThroughTheReconnectBackoff) {
  testing::ManualClock clock;
  int setups = 0;
  AmqpDialer dialer(
      Tls({Other("ca.pem"), "", ""}), Topology{{queue_}, ""}, "tls-dialer",
      [&](AmqpConnection&) {
        ++setups;
        return absl::OkStatus();
      },
      clock);
  auto first = dialer.Get();
  ASSERT_THAT(first,
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("certificate verify failed")));
  auto again = dialer.Get();  // at once: not another handshake, the backoff
  ASSERT_THAT(again, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("waiting to reconnect")));
  clock.Advance(absl::Seconds(1));
  auto later = dialer.Get();
  ASSERT_THAT(later,
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("certificate verify failed")));
  EXPECT_EQ(setups, 0);
  EXPECT_FALSE(dialer.up());
}

}  // namespace
}  // namespace outbox
