#include "service_kit/cli.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service_kit/service_main.h"
#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

std::optional<int> Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "prog");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ParseServiceCommandLine(static_cast<int>(argv.size()), argv.data(), "prog", "About prog.");
}

TEST(CliTest, VersionLineNamesTheProgramVersionCommitAndBuildType) {
  const std::string line = VersionLine("payment_service");
  EXPECT_TRUE(std::regex_match(
      line, std::regex(
                R"(payment_service [0-9]+\.[0-9]+\.[0-9]+ \((commit [0-9a-f]{12}, )?\w+ build\))")))
      << line;
  // The project's version, and the commit these sources were configured at.
  EXPECT_EQ(line.rfind(std::string("payment_service ") + OUTBOX_EXPECTED_VERSION + " (", 0), 0u)
      << line;
  const std::string commit = OUTBOX_EXPECTED_COMMIT;
  if (!commit.empty()) EXPECT_NE(line.find("(commit " + commit + ", "), std::string::npos) << line;
}

TEST(CliTest, HelpAndVersionExitZeroUsageErrorsExitTwo) {
  EXPECT_EQ(Parse({}), std::nullopt);
  EXPECT_EQ(Parse({"--help"}), 0);
  EXPECT_EQ(Parse({"--no_such_flag=1", "-h"}), 0);  // help wins
  EXPECT_EQ(Parse({"--version"}), 0);
  EXPECT_EQ(Parse({"--no_such_flag"}), 2);
  EXPECT_EQ(Parse({"positional"}), 2);
  EXPECT_EQ(Parse({"--", "positional"}), 2);
  // Abseil's built-in flags are not this program's.
  EXPECT_EQ(Parse({"--flagfile=/dev/null"}), 2);
}

TEST(CliTest, RedactsThePasswordOfAUrl) {
  EXPECT_EQ(RedactUserinfo("amqp://user:secret@host:5672/%2F"), "amqp://user:***@host:5672/%2F");
  EXPECT_EQ(RedactUserinfo("http://127.0.0.1:9093"), "http://127.0.0.1:9093");
  EXPECT_EQ(RedactUserinfo("plain"), "plain");
  EXPECT_EQ(RedactUserinfo("postgresql://u@h/db?password=s3cret&sslmode=disable"),
            "postgresql://u@h/db?password=***&sslmode=disable");
  EXPECT_EQ(RedactUserinfo("postgresql://u:pw@h/db?connect_timeout=5&password=s3cret"),
            "postgresql://u:***@h/db?connect_timeout=5&password=***");
}

TEST(ListenAddressTest, RefusesWhatCannotBeListenedOn) {
  EXPECT_OK(ValidateListenAddress("127.0.0.1:0", "x_listen"));
  EXPECT_OK(ValidateListenAddress("localhost:0", "x_listen"));
  for (const char* bad : {"garbage", ":5", "127.0.0.1:99999", "127.0.0.1:x",
                          "no-such-host.invalid:5", "10.255.255.1:5"}) {
    absl::Status s = ValidateListenAddress(bad, "x_listen");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad << ": " << s;
    EXPECT_NE(s.message().find("--x_listen"), std::string::npos) << s;
  }
  // A port another socket listens on.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  absl::Status busy =
      ValidateListenAddress(absl::StrCat("127.0.0.1:", ntohs(addr.sin_port)), "x_listen");
  close(fd);
  EXPECT_EQ(busy.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(busy.message().find("in use"), std::string::npos) << busy;
}

}  // namespace
}  // namespace outbox
