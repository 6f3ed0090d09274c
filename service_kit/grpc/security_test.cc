// The security settings' rules without a network: the bearer-token check,
// the constant-time compare, token files and TLS file validation.
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "service_kit/grpc/channel_security.h"
#include "service_kit/grpc/grpc_status.h"
#include "service_kit/grpc/server_security.h"
#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

using Metadata = std::multimap<grpc::string_ref, grpc::string_ref>;

class SecurityFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/security_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const std::string& f : files_) std::remove(f.c_str());
    rmdir(dir_.c_str());
  }
  std::string Write(const std::string& name, const std::string& contents, mode_t mode = 0600) {
    const std::string path = absl::StrCat(dir_, "/", name);
    std::ofstream(path) << contents;
    chmod(path.c_str(), mode);
    files_.push_back(path);
    return path;
  }
  std::string dir_;
  std::vector<std::string> files_;
};

TEST(ConstantTimeEqualsTest, EqualOnlyWhenSameBytesAndLength) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("s3cret-token", "s3cret-token"));
  EXPECT_FALSE(ConstantTimeEquals("s3cret-token", "s3cret-tokeN"));
  EXPECT_FALSE(ConstantTimeEquals("s3cret-token", "s3cret-token-longer"));
  EXPECT_FALSE(ConstantTimeEquals("s3cret", ""));
  EXPECT_FALSE(ConstantTimeEquals(std::string("a\0b", 3), "a"));
}

TEST(CheckBearerTokenTest, MissingIsUnauthenticatedWrongIsDeniedRightPasses) {
  const std::string expected = "right-token";
  Metadata none;
  EXPECT_EQ(CheckBearerToken(none, expected).code(), absl::StatusCode::kUnauthenticated);

  const std::string basic = "Basic dXNlcjpwdw==";
  Metadata not_bearer{{"authorization", basic}};
  EXPECT_EQ(CheckBearerToken(not_bearer, expected).code(), absl::StatusCode::kUnauthenticated);

  const std::string wrong = "Bearer wrong-token";
  Metadata wrong_md{{"authorization", wrong}};
  absl::Status denied = CheckBearerToken(wrong_md, expected);
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(denied.message().find("wrong-token"), std::string::npos) << denied;
  EXPECT_EQ(denied.message().find(expected), std::string::npos) << denied;

  const std::string prefix = "Bearer right";
  Metadata prefix_md{{"authorization", prefix}};
  EXPECT_EQ(CheckBearerToken(prefix_md, expected).code(), absl::StatusCode::kPermissionDenied);

  const std::string right = "Bearer right-token";
  Metadata right_md{{"authorization", right}};
  EXPECT_OK(CheckBearerToken(right_md, expected));
}

TEST(BearerTokenCheckTest, WithoutATokenEveryCallPasses) {
  grpc::ServerContext context;
  EXPECT_OK(FromGrpcStatus(BearerTokenCheck().Check(context)));
  EXPECT_EQ(BearerTokenCheck("t").Check(context).error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

TEST(TokenListTest, OneBareTokenOrNamedOnesNeverRepeated) {
  const std::string a(16, 'a'), b(16, 'b'), c(16, 'c');
  auto bare = ParseTokenList("abc123abc123abc1");
  ASSERT_OK(bare);
  ASSERT_EQ(bare->size(), 1u);
  EXPECT_EQ((*bare)[0].name, "operator");
  auto named = ParseTokenList(absl::StrCat("# ops team\nalice ", a, "\n\nbob   \t", b, "\n"));
  ASSERT_OK(named);
  ASSERT_EQ(named->size(), 2u);
  EXPECT_EQ((*named)[1].name, "bob");
  EXPECT_EQ((*named)[1].token, b);
  for (const std::string& bad :
       {absl::StrCat("alice ", a, "\nalice ", c), absl::StrCat("alice ", a, "\nbob ", a),
        absl::StrCat("a b ", a), std::string("# none\n"),
        // shorter than kMinTokenLength
        std::string("abc123"), absl::StrCat("alice ", a, "\nbob aaa"),
        // an older single token holding a space: not a name, not a token
        absl::StrCat("pa$$word! ", a)}) {
    auto s = ParseTokenList(bad);
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(s.status().message().find(a), std::string::npos) << "never the token";
    EXPECT_EQ(s.status().message().find("aaa"), std::string::npos) << "never the token";
  }
}

TEST(BearerTokenCheckTest, TheActorIsTheNameOfTheTokenPresented) {
  BearerTokenCheck check(std::vector<NamedToken>{{"alice", "aaa"}, {"bob", "bbb"}});
  grpc::ServerContext none;
  EXPECT_EQ(check.Check(none).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(check.Actor(none), "anonymous");
  EXPECT_EQ(BearerTokenCheck().Actor(none), "anonymous");
}

TEST_F(SecurityFilesTest, TokenFileIsTrimmedEmptyIsRefusedWorldReadableWarns) {
  std::string warning;
  auto token = ReadTokenFile(Write("token", "abc123\n"), "ops_token_file", &warning);
  ASSERT_OK(token);
  EXPECT_EQ(*token, "abc123");
  EXPECT_TRUE(warning.empty()) << warning;

  auto open = ReadTokenFile(Write("open", "abc123", 0644), "ops_token_file", &warning);
  ASSERT_OK(open);
  EXPECT_NE(warning.find("readable by every user"), std::string::npos) << warning;
  EXPECT_EQ(warning.find("abc123"), std::string::npos) << warning;

  auto empty = ReadTokenFile(Write("empty", " \n"), "ops_token_file", nullptr);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("--ops_token_file"), std::string::npos);

  auto missing = ReadTokenFile(absl::StrCat(dir_, "/nope"), "api_token_file", nullptr);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SecurityFilesTest, ServerTlsNeedsCertAndKeyReadableAndPem) {
  EXPECT_OK(ServerCredentialsFrom({}));  // plaintext

  const std::string pem = Write("cert.pem", "-----BEGIN CERTIFICATE-----\nx\n");
  auto no_key = ServerCredentialsFrom({pem, "", ""});
  EXPECT_EQ(no_key.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_key.status().message().find("--tls_key_file"), std::string::npos);

  auto ca_only = ServerCredentialsFrom({"", "", pem});
  EXPECT_EQ(ca_only.status().code(), absl::StatusCode::kInvalidArgument);

  auto unreadable = ServerCredentialsFrom({pem, absl::StrCat(dir_, "/missing.key"), ""});
  EXPECT_EQ(unreadable.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unreadable.status().message().find("missing.key"), std::string::npos);

  auto not_pem = ServerCredentialsFrom({pem, Write("key.pem", "garbage"), ""});
  EXPECT_EQ(not_pem.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(not_pem.status().message().find("not PEM"), std::string::npos);
}

TEST_F(SecurityFilesTest, ClientTlsCertAndKeyGoTogether) {
  EXPECT_OK(ChannelCredentialsFrom({}));
  const std::string pem = Write("ca.pem", "-----BEGIN CERTIFICATE-----\nx\n");
  EXPECT_OK(ChannelCredentialsFrom({pem, "", ""}));
  EXPECT_EQ(ChannelCredentialsFrom({pem, pem, ""}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ChannelCredentialsFrom({absl::StrCat(dir_, "/none"), "", ""}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace outbox
