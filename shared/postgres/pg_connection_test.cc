#include "shared/postgres/pg_connection.h"

#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/testing/status_matchers.h"
#include "shared/testing/temp_dir.h"

namespace outbox {
namespace {

using ::outbox::testing::IsOk;
using ::outbox::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kNodeScript = std::string(OUTBOX_SOURCE_DIR) + "/scripts/postgres_node.sh";

// scripts/postgres_node.sh ARGS: its standard output, or "" when it fails.
std::string Node(const std::string& args) {
  std::string out;
  FILE* pipe = popen(absl::StrCat("bash ", kNodeScript, " ", args, " 2>&1").c_str(), "r");
  if (pipe == nullptr) return "";
  std::array<char, 512> buf;
  while (fgets(buf.data(), buf.size(), pipe) != nullptr) out += buf.data();
  const int rc = pclose(pipe);
  if (rc != 0) {
    ADD_FAILURE() << "postgres_node.sh " << args << ": " << out;
    return "";
  }
  return std::string(absl::StripTrailingAsciiWhitespace(out));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// A port nothing listens on: bound, then closed.
int ClosedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

TEST(IsPgConninfoTest, TakesLibpqUrisAndLeavesPathsToSqlite) {
  EXPECT_TRUE(IsPgConninfo("postgresql://outbox@127.0.0.1:5432/outbox"));
  EXPECT_TRUE(IsPgConninfo("postgres://h1,h2/db?target_session_attrs=read-write"));
  EXPECT_FALSE(IsPgConninfo("payment.db"));
  EXPECT_FALSE(IsPgConninfo("/var/lib/outbox/postgresql:/payment.db"));
  EXPECT_FALSE(IsPgConninfo(""));
}

TEST(RedactConninfoTest, HidesThePasswordOfAUriAndOfKeyValuePairs) {
  for (const char* conninfo : {"postgresql://outbox:hunter2@127.0.0.1:5433/outbox",
                               "postgresql://outbox@127.0.0.1/outbox?password=hunter2",
                               "host=127.0.0.1 password=hunter2 user=outbox",
                               "host=127.0.0.1 password='hunter2' user=outbox"}) {
    const std::string redacted = RedactConninfo(conninfo);
    EXPECT_THAT(redacted, Not(HasSubstr("hunter2"))) << conninfo;
    EXPECT_THAT(redacted, HasSubstr("password=***")) << conninfo;
    EXPECT_THAT(redacted, HasSubstr("host=127.0.0.1")) << conninfo;
    EXPECT_THAT(redacted, HasSubstr("user=outbox")) << conninfo;
  }
}

TEST(RedactConninfoTest, KeepsEverySettingButThePassword) {
  EXPECT_EQ(
      RedactConninfo("postgresql://outbox@127.0.0.1:5433,127.0.0.1:5434/outbox?"
                     "target_session_attrs=read-write&passfile=/tmp/a/pgpass"),
      "user=outbox passfile=/tmp/a/pgpass dbname=outbox host=127.0.0.1,127.0.0.1 port=5433,5434 "
      "target_session_attrs=read-write");
  EXPECT_EQ(RedactConninfo("host=h application_name='a b'"), "host=h application_name='a b'");
}

TEST(RedactConninfoTest, DoesNotEchoWhatItCannotParse) {
  const std::string redacted = RedactConninfo("host=h password='hunter2");
  EXPECT_THAT(redacted, Not(HasSubstr("hunter2")));
}

TEST(PgStatusTest, MapsSqlstateClasses) {
  EXPECT_THAT(PgStatus("08006", "x"), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(PgStatus("57P01", "x"), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(PgStatus("25006", "x"), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(PgStatus("57014", "x"), StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(PgStatus("28P01", "x"), StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(PgStatus("28000", "x"), StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(PgStatus("40001", "x"), StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(PgStatus("40P01", "x"), StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(PgStatus("55P03", "x"), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(PgStatus("23505", "x"), StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(PgStatus("23503", "x"), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(PgStatus("42P01", "x"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(PgStatus("53100", "x"), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_THAT(PgStatus("XX000", "boom"),
              StatusIs(absl::StatusCode::kInternal, HasSubstr("XX000: boom")));
}

// A primary and its synchronous standby, from scripts/postgres_node.sh.
class PgConnectionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("pg_connection_test");
    chmod(dir_->path().c_str(), 0755);  // for the user postgres, under root
    primary_ = dir_->path() + "/primary";
    standby_ = dir_->path() + "/standby";
    Node("fresh " + primary_);
    Node(absl::StrCat("standby ", primary_, " ", standby_));
  }
  static void TearDownTestSuite() {
    Node("stop " + standby_);
    Node("stop " + primary_);
    delete dir_;
  }
  static int PortOf(const std::string& dir) {
    std::ifstream in(dir + "/node.env");
    std::string line;
    while (std::getline(in, line)) {
      absl::string_view rest = line;
      if (absl::ConsumePrefix(&rest, "PGPORT_NODE=")) return std::stoi(std::string(rest));
    }
    return 0;
  }

  static TempDir* dir_;
  static std::string primary_;
  static std::string standby_;
};
TempDir* PgConnectionTest::dir_ = nullptr;
std::string PgConnectionTest::primary_;
std::string PgConnectionTest::standby_;

TEST_F(PgConnectionTest, ConnectsWithTheScriptsUrlAndRunsStatements) {
  const std::string url = Node("url " + primary_);
  EXPECT_THAT(url, Not(HasSubstr(ReadFile(primary_ + "/password"))));
  auto conn = PgConnection::Open(url);
  ASSERT_THAT(conn, IsOk());
  EXPECT_EQ((*conn)->port(), PortOf(primary_));
  EXPECT_TRUE((*conn)->ok());
  ASSERT_THAT((*conn)->Exec("CREATE TABLE kv (k text PRIMARY KEY, v text)"), IsOk());
  auto inserted =
      (*conn)->Query("INSERT INTO kv VALUES ($1, $2), ($3, $4)", {"a", "1", "b", std::nullopt});
  ASSERT_THAT(inserted, IsOk());
  EXPECT_EQ(inserted->affected(), 2);
  auto rows = (*conn)->Query("SELECT k, v FROM kv ORDER BY k");
  ASSERT_THAT(rows, IsOk());
  ASSERT_EQ(rows->rows(), 2);
  ASSERT_EQ(rows->columns(), 2);
  EXPECT_EQ(rows->Get(0, 0), "a");
  EXPECT_EQ(rows->Get(0, 1), "1");
  EXPECT_FALSE(rows->IsNull(0, 1));
  EXPECT_TRUE(rows->IsNull(1, 1));
  auto application = (*conn)->Query("SELECT current_setting('application_name')");
  ASSERT_THAT(application, IsOk());
  EXPECT_EQ(application->Get(0, 0), "outbox");
}

TEST_F(PgConnectionTest, ErrorsAreStatusesBySqlstate) {
  auto conn = PgConnection::Open(Node("url " + primary_));
  ASSERT_THAT(conn, IsOk());
  ASSERT_THAT((*conn)->Exec("CREATE TABLE once (id int PRIMARY KEY)"), IsOk());
  ASSERT_THAT((*conn)->Query("INSERT INTO once VALUES ($1)", {"1"}), IsOk());
  EXPECT_THAT((*conn)->Query("INSERT INTO once VALUES ($1)", {"1"}),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("23505")));
  EXPECT_THAT((*conn)->Exec("SELEC 1"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("42601")));
  EXPECT_THAT((*conn)->Exec("SELECT * FROM missing"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT((*conn)->Exec("SET statement_timeout = 50; SELECT pg_sleep(5)"),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("57014")));
  EXPECT_TRUE((*conn)->ok());
}

TEST_F(PgConnectionTest, AWriteOnTheStandbyIsUnavailable) {
  auto conn = PgConnection::Open(Node("url " + standby_));
  ASSERT_THAT(conn, IsOk());
  EXPECT_THAT((*conn)->Exec("CREATE TABLE nope (id int)"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("25006")));
}

TEST_F(PgConnectionTest, SeveralHostsReachTheReadWriteOne) {
  // The standby first: target_session_attrs=read-write passes it over.
  const std::string url = Node(absl::StrCat("url ", standby_, " ", primary_));
  EXPECT_THAT(url, HasSubstr("target_session_attrs=read-write"));
  auto conn = PgConnection::Open(url);
  ASSERT_THAT(conn, IsOk());
  EXPECT_EQ((*conn)->port(), PortOf(primary_));
  auto recovery = (*conn)->Query("SELECT pg_is_in_recovery()");
  ASSERT_THAT(recovery, IsOk());
  EXPECT_EQ(recovery->Get(0, 0), "f");
}

TEST_F(PgConnectionTest, NoHostAnsweringIsUnavailableAndTheMessageHasNoPassword) {
  const int port = ClosedPort();
  ASSERT_NE(port, 0);
  auto conn =
      PgConnection::Open(absl::StrCat("postgresql://outbox:hunter2@127.0.0.1:", port, "/outbox"));
  EXPECT_THAT(conn, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("password=***")));
  EXPECT_THAT(conn.status().message(), Not(HasSubstr("hunter2")));
}

TEST_F(PgConnectionTest, AWrongPasswordIsUnauthenticated) {
  auto conn = PgConnection::Open(
      absl::StrCat("postgresql://outbox:not-the-password@127.0.0.1:", PortOf(primary_), "/outbox"));
  EXPECT_THAT(conn, StatusIs(absl::StatusCode::kUnauthenticated,
                             HasSubstr("password authentication failed")));
  EXPECT_THAT(conn.status().message(), Not(HasSubstr("not-the-password")));
}

TEST_F(PgConnectionTest, AServerKilledUnderAConnectionMakesItUnavailable) {
  const std::string node = dir_->path() + "/killed";
  Node("fresh " + node);
  auto conn = PgConnection::Open(Node("url " + node));
  ASSERT_THAT(conn, IsOk());
  ASSERT_THAT((*conn)->Exec("SELECT 1"), IsOk());
  Node("kill " + node);
  EXPECT_THAT((*conn)->Query("SELECT 1"), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_FALSE((*conn)->ok());
}

}  // namespace
}  // namespace outbox
