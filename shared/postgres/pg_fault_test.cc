// PostgreSQL's refusals and faults as the library reports them, each on a
// real server of scripts/postgres_node.sh (a primary and its synchronous
// standby): a clear Status, neither the password nor the connection string
// in its message, and nothing half-written. The statuses:
//
// - No server answers: UNAVAILABLE (it may answer later: connect again).
// - The credentials refused (a wrong password, none at all): UNAUTHENTICATED.
//   No retry mends it, so it must not be UNAVAILABLE (which PgSession and
//   the roles' callers treat as "connect again"); UNAUTHENTICATED rather
//   than FAILED_PRECONDITION because it names the cause, the caller's
//   credentials, not the database's state, and a process refuses to start
//   on it all the same.
// - A connection string libpq cannot parse: INVALID_ARGUMENT, not echoed.
// - A database without the schema: CheckPgSchema's FAILED_PRECONDITION,
//   nothing created.
// - A write on a read-only standby: UNAVAILABLE (25006; the primary is
//   elsewhere: connect again), nothing written on the primary.
// - statement_timeout run out: DEADLINE_EXCEEDED (57014). The statement
//   did not finish in the time the database was told to give it; the
//   connection is still good, so it is not UNAVAILABLE, and the transaction
//   is rolled back.
// - A full disk: RESOURCE_EXHAUSTED (53100), the transaction rolled back.
//   Shown with a tablespace on a small tmpfs, which needs root (mount); the
//   test is skipped without it.
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shared/base/clock.h"
#include "shared/postgres/internal/pg_outbox.h"
#include "shared/postgres/pg_connection.h"
#include "shared/postgres/pg_schema.h"
#include "shared/postgres/pg_session.h"
#include "shared/testing/pg_servers.h"
#include "shared/testing/status_matchers.h"

namespace outbox {
namespace {

using ::outbox::testing::IsOk;
using ::outbox::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// The binary's primary and its synchronous standby.
testing::PgServersEnvironment* const kServers =
    testing::AddPgServers("pg_fault_test", testing::PgServers::kWithStandby);

// A database of its own on the primary, made now: the URL of `node` (the
// primary or its standby, which replays it) for it.
std::string FreshDatabase(const std::string& name, const std::string& node) {
  if (testing::FreshPgDatabase(kServers->url(), name).empty()) return "";
  return testing::PgUrlOfDatabase(testing::PgServers::UrlOf(node), name);
}

int64_t Count(const std::string& url, const std::string& sql) {
  auto conn = PgConnection::Open(url);
  EXPECT_THAT(conn, IsOk());
  if (!conn.ok()) return -1;
  auto r = (*conn)->Query(sql);
  EXPECT_THAT(r, IsOk()) << sql;
  int64_t n = -1;
  if (r.ok() && r->rows() > 0) EXPECT_TRUE(absl::SimpleAtoi(r->Get(0, 0), &n)) << sql;
  return n;
}

// The outbox's schema and a business table, orders, on the primary.
void CreateTables(const std::string& url) {
  auto session = PgSession::Open(url);
  ASSERT_THAT(session, IsOk());
  ASSERT_THAT(UpgradePgSchema(**session, PgOutboxSchema()), IsOk());
  auto conn = PgConnection::Open(url);
  ASSERT_THAT(conn, IsOk());
  ASSERT_THAT((*conn)->Exec("CREATE TABLE orders (id TEXT PRIMARY KEY)"), IsOk());
}

MessageSpec Spec(const std::string& id) {
  return {id, "order", "key-" + id, "EVENTS", "OrderPlaced", "", "payload", ""};
}

std::function<absl::Status(PgConnection&)> InsertOrder(const std::string& id) {
  return [id](PgConnection& conn) {
    return conn.Query("INSERT INTO orders VALUES ($1)", {id}).status();
  };
}

TEST(PgFaultTest, NoServerAnsweringIsUnavailableWithoutThePassword) {
  const int port = testing::ClosedLocalPort();
  ASSERT_NE(port, 0);
  for (const std::string& conninfo :
       {absl::StrCat("postgresql://outbox:hunter2@127.0.0.1:", port, "/outbox"),
        absl::StrCat("host=127.0.0.1 port=", port,
                     " user=outbox password=hunter2 dbname=outbox")}) {
    auto conn = PgConnection::Open(conninfo);
    EXPECT_THAT(conn, StatusIs(absl::StatusCode::kUnavailable,
                               AllOf(HasSubstr("cannot connect to PostgreSQL"),
                                     HasSubstr("password=***"), Not(HasSubstr("hunter2")))));
    auto session = PgSession::Open(conninfo);
    EXPECT_THAT(session, StatusIs(absl::StatusCode::kUnavailable, Not(HasSubstr("hunter2"))));
  }
}

TEST(PgFaultTest, RefusedCredentialsAreUnauthenticatedWithoutThePassword) {
  const int port = testing::PgNodePort(kServers->servers().primary());
  const std::string uri =
      absl::StrCat("postgresql://outbox:wrong-secret-7@127.0.0.1:", port, "/outbox");
  const std::string pairs =
      absl::StrCat("host=127.0.0.1 port=", port, " user=outbox password=wrong-secret-7");
  for (const std::string& conninfo : {uri, pairs}) {
    auto conn = PgConnection::Open(conninfo);
    EXPECT_THAT(conn, StatusIs(absl::StatusCode::kUnauthenticated,
                               AllOf(HasSubstr("refused the credentials"),
                                     HasSubstr("password authentication failed"),
                                     Not(HasSubstr("wrong-secret-7")), Not(HasSubstr(conninfo)))));
    auto session = PgSession::Open(conninfo);
    EXPECT_THAT(session,
                StatusIs(absl::StatusCode::kUnauthenticated, Not(HasSubstr("wrong-secret-7"))));
  }
  // No password at all: a password file without the role's line.
  const std::string empty = kServers->servers().dir() + "/empty.pgpass";
  std::ofstream(empty).close();  // an empty file
  chmod(empty.c_str(), 0600);
  auto conn = PgConnection::Open(
      absl::StrCat("postgresql://outbox@127.0.0.1:", port, "/outbox?passfile=", empty));
  EXPECT_THAT(conn, StatusIs(absl::StatusCode::kUnauthenticated, HasSubstr("no password")));
}

TEST(PgFaultTest, AConnectionStringLibpqCannotParseIsNotEchoed) {
  for (const char* conninfo : {"postgresql://outbox:hunter%zz2@127.0.0.1/outbox",
                               "postgresql://outbox@127.0.0.1/outbox?password=hunter%zz2",
                               "host=127.0.0.1 password='hunter2", "host=127.0.0.1 hunter2"}) {
    auto conn = PgConnection::Open(conninfo);
    EXPECT_THAT(conn, StatusIs(absl::StatusCode::kInvalidArgument, Not(HasSubstr("hunter"))))
        << conninfo;
  }
}

TEST(PgFaultTest, ADatabaseWithoutTheSchemaIsRefusedAndLeftEmpty) {
  const std::string url = FreshDatabase("no_schema", kServers->servers().primary());
  auto session = PgSession::Open(url);
  ASSERT_THAT(session, IsOk());
  EXPECT_THAT(CheckPgSchema(**session, PgOutboxSchema()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("holds no schema outbox")));
  EXPECT_EQ(Count(url, "SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace"),
            0);
}

TEST(PgFaultTest, AWriteOnAStandbyIsUnavailableAndWritesNothing) {
  const std::string primary = FreshDatabase("on_standby", kServers->servers().primary());
  ASSERT_NO_FATAL_FAILURE(CreateTables(primary));
  // The standby alone: no read-write host to pass over to.
  const std::string standby = testing::PgUrlOfDatabase(
      testing::PgServers::UrlOf(kServers->servers().standby()), "on_standby");
  auto session = PgSession::Open(standby);
  ASSERT_THAT(session, IsOk());
  SystemClock clock;
  PgOutbox outbox(**session, clock);
  EXPECT_THAT(outbox.Write(Spec("m1"), InsertOrder("o1")),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("25006")));
  EXPECT_EQ(Count(primary, "SELECT count(*) FROM orders"), 0);
  EXPECT_EQ(Count(primary, "SELECT count(*) FROM outbox"), 0);
}

TEST(PgFaultTest, AStatementTimeoutIsDeadlineExceededAndRollsBack) {
  const std::string url = FreshDatabase("timeout", kServers->servers().primary());
  ASSERT_NO_FATAL_FAILURE(CreateTables(url));
  auto session = PgSession::Open(url + "&options=-cstatement_timeout%3D200");
  ASSERT_THAT(session, IsOk());
  SystemClock clock;
  PgOutbox outbox(**session, clock);
  // Another transaction holds the outbox: the business row goes in, the
  // outbox row waits past the timeout.
  auto holder = PgConnection::Open(url);
  ASSERT_THAT(holder, IsOk());
  ASSERT_THAT((*holder)->Exec("BEGIN; LOCK TABLE outbox IN ACCESS EXCLUSIVE MODE"), IsOk());
  EXPECT_THAT(outbox.Write(Spec("m1"), InsertOrder("o1")),
              StatusIs(absl::StatusCode::kDeadlineExceeded,
                       AllOf(HasSubstr("57014"), HasSubstr("statement timeout"))));
  ASSERT_THAT((*holder)->Exec("ROLLBACK"), IsOk());
  EXPECT_EQ(Count(url, "SELECT count(*) FROM orders"), 0);
  EXPECT_EQ(Count(url, "SELECT count(*) FROM outbox"), 0);
  // The connection is still good: the next write commits.
  EXPECT_THAT(outbox.Write(Spec("m2"), InsertOrder("o2")), IsOk());
  EXPECT_EQ(Count(url, "SELECT count(*) FROM orders"), 1);
}

TEST(PgFaultTest, AFullDiskIsResourceExhaustedAndRollsBack) {
  if (geteuid() != 0) GTEST_SKIP() << "mounting a small tmpfs needs root";
  const passwd* server = getpwnam("postgres");
  if (server == nullptr) GTEST_SKIP() << "no user postgres";
  // A 1 MiB tmpfs, the server's, as the tablespace of the outbox table.
  const std::string space = kServers->servers().dir() + "/small";
  ASSERT_EQ(mkdir(space.c_str(), 0700), 0);
  ASSERT_EQ(system(absl::StrCat("mount -t tmpfs -o size=1m,mode=0700,uid=", server->pw_uid,
                                ",gid=", server->pw_gid, " outbox-pg-fault ", space)
                       .c_str()),
            0);
  // Unmounted once no server holds its files.
  kServers->servers().AtStop([space] { system(absl::StrCat("umount ", space).c_str()); });
  const std::string url = FreshDatabase("full_disk", kServers->servers().primary());
  ASSERT_NO_FATAL_FAILURE(CreateTables(url));
  auto conn = PgConnection::Open(url);
  ASSERT_THAT(conn, IsOk());
  ASSERT_THAT((*conn)->Exec(absl::StrCat("CREATE TABLESPACE small LOCATION '", space, "'")),
              IsOk());
  ASSERT_THAT((*conn)->Exec("ALTER TABLE outbox SET TABLESPACE small"), IsOk());
  // Filled up by rows that do not compress (md5 text, stored inline).
  ASSERT_THAT((*conn)->Exec("CREATE TABLE filler (b TEXT) TABLESPACE small;"
                            "ALTER TABLE filler ALTER b SET STORAGE PLAIN"),
              IsOk());
  absl::Status fill;
  for (int i = 0; i < 100 && fill.ok(); ++i) {
    fill = (*conn)->Exec(
        "INSERT INTO filler SELECT string_agg(md5(random()::text || i), '')"
        " FROM generate_series(1, 64) g, generate_series(1, 100) i GROUP BY g");
  }
  ASSERT_THAT(fill, StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("53100")));

  auto session = PgSession::Open(url);
  ASSERT_THAT(session, IsOk());
  SystemClock clock;
  PgOutbox outbox(**session, clock);
  // The business row goes in (its table is elsewhere), the outbox row finds
  // no room.
  EXPECT_THAT(outbox.Write(Spec("m1"), InsertOrder("o1")),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("53100")));
  EXPECT_EQ(Count(url, "SELECT count(*) FROM orders"), 0);
  EXPECT_EQ(Count(url, "SELECT count(*) FROM outbox"), 0);
}

}  // namespace
}  // namespace outbox
