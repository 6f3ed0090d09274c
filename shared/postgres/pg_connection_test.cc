#include "shared/postgres/pg_connection.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/testing/pg_servers.h"
#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

using ::outbox::testing::IsOk;
using ::outbox::testing::PgNode;
using ::outbox::testing::PgNodePort;
using ::outbox::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::Not;

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
    servers_ = new testing::PgServers("pg_connection_test", testing::PgServers::kWithStandby);
    ASSERT_TRUE(servers_->ok());
    primary_ = servers_->primary();
    standby_ = servers_->standby();
  }
  static void TearDownTestSuite() { delete servers_; }

  static testing::PgServers* servers_;
  static std::string primary_;
  static std::string standby_;
};
testing::PgServers* PgConnectionTest::servers_ = nullptr;
std::string PgConnectionTest::primary_;
std::string PgConnectionTest::standby_;

TEST_F(PgConnectionTest, ConnectsWithTheScriptsUrlAndRunsStatements) {
  const std::string url = PgNode("url " + primary_);
  EXPECT_THAT(url, Not(HasSubstr(testing::PgNodePassword(primary_))));
  auto conn = PgConnection::Open(url);
  ASSERT_THAT(conn, IsOk());
  EXPECT_EQ((*conn)->port(), PgNodePort(primary_));
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
  auto conn = PgConnection::Open(PgNode("url " + primary_));
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
  auto conn = PgConnection::Open(PgNode("url " + standby_));
  ASSERT_THAT(conn, IsOk());
  EXPECT_THAT((*conn)->Exec("CREATE TABLE nope (id int)"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("25006")));
}

TEST_F(PgConnectionTest, SeveralHostsReachTheReadWriteOne) {
  // The standby first: target_session_attrs=read-write passes it over.
  const std::string url = PgNode(absl::StrCat("url ", standby_, " ", primary_));
  EXPECT_THAT(url, HasSubstr("target_session_attrs=read-write"));
  auto conn = PgConnection::Open(url);
  ASSERT_THAT(conn, IsOk());
  EXPECT_EQ((*conn)->port(), PgNodePort(primary_));
  auto recovery = (*conn)->Query("SELECT pg_is_in_recovery()");
  ASSERT_THAT(recovery, IsOk());
  EXPECT_EQ(recovery->Get(0, 0), "f");
}

TEST_F(PgConnectionTest, NoHostAnsweringIsUnavailableAndTheMessageHasNoPassword) {
  const int port = testing::ClosedLocalPort();
  ASSERT_NE(port, 0);
  auto conn =
      PgConnection::Open(absl::StrCat("postgresql://outbox:hunter2@127.0.0.1:", port, "/outbox"));
  EXPECT_THAT(conn, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("password=***")));
  EXPECT_THAT(conn.status().message(), Not(HasSubstr("hunter2")));
}

TEST_F(PgConnectionTest, AWrongPasswordIsUnauthenticated) {
  auto conn = PgConnection::Open(absl::StrCat(
      "postgresql://outbox:not-the-password@127.0.0.1:", PgNodePort(primary_), "/outbox"));
  EXPECT_THAT(conn, StatusIs(absl::StatusCode::kUnauthenticated,
                             HasSubstr("password authentication failed")));
  EXPECT_THAT(conn.status().message(), Not(HasSubstr("not-the-password")));
}

TEST_F(PgConnectionTest, AServerKilledUnderAConnectionMakesItUnavailable) {
  const std::string node = servers_->dir() + "/killed";
  PgNode("fresh " + node);
  auto conn = PgConnection::Open(PgNode("url " + node));
  ASSERT_THAT(conn, IsOk());
  ASSERT_THAT((*conn)->Exec("SELECT 1"), IsOk());
  PgNode("kill " + node);
  EXPECT_THAT((*conn)->Query("SELECT 1"), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_FALSE((*conn)->ok());
}

}  // namespace
}  // namespace outbox
