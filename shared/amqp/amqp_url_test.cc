#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "shared/amqp/amqp_url.h"
#include "shared/observability/log.h"
#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

TEST(AmqpUrlTest, ParsesTheAmqpUriSpec) {
  auto u = AmqpUrl::Parse("amqp://user:p%40ss@127.0.0.1:5673/%2F");
  ASSERT_OK(u);
  EXPECT_EQ(u->user, "user");
  EXPECT_EQ(u->password, "p@ss");
  EXPECT_EQ(u->port, 5673);
  EXPECT_EQ(u->vhost, "/");
  EXPECT_EQ(u->Redacted().find("p@ss"), std::string::npos);
  auto v = AmqpUrl::Parse("amqp://u:p@host/orders");
  ASSERT_OK(v);
  EXPECT_EQ(v->vhost, "orders");
  EXPECT_EQ(v->port, 5672);
  EXPECT_FALSE(v->tls);
  EXPECT_TRUE(absl::IsInvalidArgument(AmqpUrl::Parse("http://x").status()));
}

TEST(AmqpUrlTest, AmqpsIsTlsOnPort5671ByDefault) {
  auto u = AmqpUrl::Parse("amqps://u:secret@broker.example/%2F");
  ASSERT_OK(u);
  EXPECT_TRUE(u->tls);
  EXPECT_EQ(u->port, 5671);
  EXPECT_EQ(u->host, "broker.example");
  EXPECT_EQ(u->Redacted(), "amqps://u:***@broker.example:5671/%2F");
  auto v = AmqpUrl::Parse("amqps://u:p@127.0.0.1:15671/x");
  ASSERT_OK(v);
  EXPECT_EQ(v->port, 15671);
}

// The TLS files against the scheme; each error names the flag to fix.
TEST(AmqpUrlTest, TlsFilesAreCheckedAgainstTheScheme) {
  const std::string dir = ::testing::TempDir();
  const std::string not_pem = dir + "/amqp_url_test_not_pem.txt";
  std::ofstream(not_pem) << "not a certificate\n";
  auto message = [](const absl::StatusOr<AmqpUrl>& u) { return std::string(u.status().message()); };

  auto plain = AmqpUrl::Parse("amqp://u:p@h/", {});
  ASSERT_OK(plain);
  EXPECT_FALSE(plain->tls);

  auto files_without_tls = AmqpUrl::Parse("amqp://u:p@h/", {not_pem, "", ""});
  EXPECT_TRUE(absl::IsInvalidArgument(files_without_tls.status()));
  EXPECT_NE(message(files_without_tls).find("amqps://"), std::string::npos);

  auto no_ca = AmqpUrl::Parse("amqps://u:p@h/", {});
  EXPECT_TRUE(absl::IsInvalidArgument(no_ca.status()));
  EXPECT_NE(message(no_ca).find("--amqp_tls_ca_file"), std::string::npos);

  auto half = AmqpUrl::Parse("amqps://u:p@h/", {not_pem, not_pem, ""});
  EXPECT_TRUE(absl::IsInvalidArgument(half.status()));
  EXPECT_NE(message(half).find("--amqp_tls_key_file"), std::string::npos);

  auto missing = AmqpUrl::Parse("amqps://u:p@h/", {dir + "/no/such/ca.pem", "", ""});
  EXPECT_TRUE(absl::IsInvalidArgument(missing.status()));
  EXPECT_NE(message(missing).find("--amqp_tls_ca_file: cannot read"), std::string::npos)
      << message(missing);

  auto missing_key = AmqpUrl::Parse("amqps://u:p@h/", {not_pem, not_pem, dir + "/no.key"});
  EXPECT_TRUE(absl::IsInvalidArgument(missing_key.status()));
  EXPECT_NE(message(missing_key).find("--amqp_tls_key_file: cannot read"), std::string::npos)
      << message(missing_key);

  auto garbage = AmqpUrl::Parse("amqps://u:p@h/", {not_pem, "", ""});
  EXPECT_TRUE(absl::IsInvalidArgument(garbage.status()));
  EXPECT_NE(message(garbage).find("--amqp_tls_ca_file: no CA certificate loads"), std::string::npos)
      << message(garbage);
  unlink(not_pem.c_str());
}

// The password from a file of its own replaces the URL's; the file is
// checked as the services check AMQP_PASSWORD_FILE.
TEST(AmqpUrlTest, APasswordFileReplacesTheUrlsPassword) {
  const std::string dir = ::testing::TempDir();
  const std::string file = dir + "/amqp_url_test.password";
  std::ofstream(file) << "s3cret\n";
  chmod(file.c_str(), 0600);
  std::vector<std::string> warnings;
  SetLogSink([&](const LogRecord& r) {
    if (r.level == LogLevel::kWarning) warnings.emplace_back(r.event);
  });
  auto u = AmqpUrl::Parse("amqp://shop@h:5672/%2F");
  ASSERT_OK(u);
  ASSERT_OK(u->ReadPasswordFile(file));
  EXPECT_EQ(u->user, "shop");
  EXPECT_EQ(u->password, "s3cret");
  EXPECT_EQ(u->Redacted().find("s3cret"), std::string::npos);
  EXPECT_TRUE(warnings.empty());
  chmod(file.c_str(), 0644);  // every user may read it: used, with a warning
  ASSERT_OK(u->ReadPasswordFile(file));
  SetLogSink(nullptr);
  EXPECT_EQ(warnings, std::vector<std::string>{"password_file_too_open"});

  const absl::Status missing = u->ReadPasswordFile(dir + "/no.password");
  EXPECT_TRUE(absl::IsInvalidArgument(missing));
  EXPECT_NE(missing.message().find("--amqp_password_file: cannot read"), std::string::npos)
      << missing;
  std::ofstream(file) << " \n";
  const absl::Status empty = u->ReadPasswordFile(file);
  EXPECT_TRUE(absl::IsInvalidArgument(empty));
  EXPECT_NE(empty.message().find("is empty"), std::string::npos) << empty;
  EXPECT_EQ(u->password, "s3cret");  // kept when the file is refused
  unlink(file.c_str());
}

TEST(AmqpUrlTest, ACommaSeparatedNodeListIsOneClusterUrl) {
  auto u = AmqpUrl::Parse("amqp://u:p%2Cq@127.0.0.1:5672,127.0.0.1:5673,broker3/%2F");
  ASSERT_OK(u);
  ASSERT_EQ(u->Nodes().size(), 3u);
  EXPECT_EQ(u->HostPort(), "127.0.0.1:5672");  // Connect dials the first
  EXPECT_EQ(u->Nodes()[1].port, 5673);
  EXPECT_EQ(u->Nodes()[2].host, "broker3");
  EXPECT_EQ(u->Nodes()[2].port, 5672);  // the scheme's default port
  EXPECT_EQ(u->password, "p,q");
  EXPECT_EQ(u->vhost, "/");
  EXPECT_EQ(u->Redacted(), "amqp://u:***@127.0.0.1:5672,127.0.0.1:5673,broker3:5672/%2F");
  const AmqpUrl second = u->Node(1);
  EXPECT_EQ(second.HostPort(), "127.0.0.1:5673");
  EXPECT_EQ(second.Nodes().size(), 1u);
  EXPECT_EQ(second.user, "u");
  EXPECT_EQ(second.Redacted(), "amqp://u:***@127.0.0.1:5673/%2F");
  EXPECT_EQ(u->Node(3).HostPort(), "127.0.0.1:5672");  // wraps around

  // A comma in the password does not split nodes; amqps keeps its default port.
  auto s = AmqpUrl::Parse("amqps://u:a,b@h1,h2:15671/vh");
  ASSERT_OK(s);
  EXPECT_EQ(s->password, "a,b");
  ASSERT_EQ(s->Nodes().size(), 2u);
  EXPECT_EQ(s->Nodes()[0].port, 5671);
  EXPECT_EQ(s->Nodes()[1].port, 15671);
  EXPECT_TRUE(s->tls);
  EXPECT_EQ(s->vhost, "vh");

  // IPv6 literals keep their brackets in the URL.
  auto v6 = AmqpUrl::Parse("amqp://u:p@[::1]:5674,127.0.0.1/%2F");
  ASSERT_OK(v6);
  EXPECT_EQ(v6->Nodes()[0].host, "::1");
  EXPECT_EQ(v6->Nodes()[0].port, 5674);
  EXPECT_EQ(v6->Nodes()[1].port, 5672);

  // A single node has one address.
  auto one = AmqpUrl::Parse("amqp://u:p@h:1/%2F");
  ASSERT_OK(one);
  ASSERT_EQ(one->Nodes().size(), 1u);
  EXPECT_EQ(one->Redacted(), "amqp://u:***@h:1/%2F");
}

TEST(AmqpUrlTest, BadNodeListsSayWhatIsWrong) {
  auto message = [](absl::string_view url) {
    auto u = AmqpUrl::Parse(url);
    EXPECT_TRUE(absl::IsInvalidArgument(u.status())) << url;
    return std::string(u.status().message());
  };
  EXPECT_NE(message("amqp://u:p@h1:5672,,h3:5674/%2F").find("empty node"), std::string::npos);
  EXPECT_NE(message("amqp://u:p@h1:5672,/%2F").find("empty node"), std::string::npos);
  EXPECT_NE(message("amqp://u:p@h1:5672,h1:5672/%2F").find("h1:5672 is listed twice"),
            std::string::npos);
  EXPECT_NE(message("amqp://u:p@h1:5672,h2:0/%2F").find("node 2: AMQP URL port"),
            std::string::npos);
  EXPECT_NE(message("amqp://u:p@h1:5672,h2:x/%2F").find("node 2:"), std::string::npos);
  EXPECT_NE(message("amqp://u:p@h1/%2F,amqp://u:p@h2/%2F").find("not as several URLs"),
            std::string::npos);
}

// Found by fuzz/amqp_url_fuzz.cc: rabbitmq-c takes these (it stops at the NUL).
TEST(AmqpUrlTest, RefusesWhatCannotBeConnectedTo) {
  EXPECT_TRUE(absl::IsInvalidArgument(AmqpUrl::Parse("amqp://h:0/").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      AmqpUrl::Parse(std::string("amqp://h:5672/\0amqp://other/", 28)).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(AmqpUrl::Parse("amqp://h\n:5672/").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(AmqpUrl::Parse("amqp://h:5672/a%0Ab").status()));
}

}  // namespace
}  // namespace outbox
