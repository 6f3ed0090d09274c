// Backups: scripts/backup.sh copies payment.db and accounting.db while the
// services run under load, and the copied pair passes outbox_check. Then the
// restore drill: the services are stopped, both files are replaced by the
// copies, the services start again, and every payment in the restored
// payment.db ends SENT with exactly one voucher (rows acknowledged after the
// copy were SENDING in it and are delivered again; accounting's dedup keeps
// them harmless). Payments made after the copy are gone with the restore: a
// restore goes back in time, which is what the docs say of it.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "shared/sqlite/sqlite_file.h"
#include "tests/support/load.h"

namespace outbox::testing {
namespace {

namespace fs = std::filesystem;

struct ScriptResult {
  int exit_code = -1;
  std::string output;
};

ScriptResult RunScript(const ServiceSet& services, const std::vector<std::string>& args,
                       const std::string& log_name) {
  Process p;
  const std::string log = absl::StrCat(services.dir(), "/", log_name);
  std::vector<std::string> argv = {absl::StrCat(OUTBOX_SOURCE_DIR, "/scripts/backup.sh")};
  argv.insert(argv.end(), args.begin(), args.end());
  p.Start("/bin/bash", argv, {}, log);
  ScriptResult r;
  r.exit_code = p.WaitExit(absl::Seconds(120));
  r.output = p.Log();
  return r;
}

CheckResult CheckPair(const ServiceSet& services, const std::string& dir) {
  Process p;
  const std::string log = absl::StrCat(services.dir(), "/outbox_check_backup.out");
  p.Start(BinaryPath("outbox_check"),
          {"--json", "--payment_db=" + dir + "/payment.db",
           "--accounting_db=" + dir + "/accounting.db"},
          {}, log);
  CheckResult r;
  r.exit_code = p.WaitExit(absl::Seconds(120));
  r.output = p.Log();
  return r;
}

// Recovery that retries and hands over quickly, with a budget no test spends.
const Env kFastRecovery = {{"RECOVERY_BASE_DELAY", "500ms"},
                           {"RECOVERY_MAX_DELAY", "2s"},
                           {"RECOVERY_MAX_ATTEMPTS", "100"},
                           {"RECOVERY_IDLE_SLEEP", "200ms"},
                           {"RECOVERY_LEASE_TTL", "2s"}};

void ReplaceDb(const std::string& from, const std::string& to) {
  for (const char* suffix : {"-wal", "-shm"}) fs::remove(to + suffix);
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
}

TEST(BackupTest, AnOnlineBackupPassesTheCheckerAndRestoresWithNothingBookedTwice) {
  constexpr int kPayments = 1500;
  ServiceSet services(kFastRecovery);
  services.StartAll();
  services.StartRecovery("r1");
  PaymentLoad load(services, "backup-", kPayments, 4, absl::Milliseconds(4));

  // Under load: some payments made, more coming.
  ASSERT_TRUE(PollUntil([&] { return load.created() >= kPayments / 3; }, absl::Seconds(60)));
  const std::string backup = services.dir() + "/backup";
  const ScriptResult taken = RunScript(
      services,
      {"backup", backup, services.dir() + "/payment.db", services.dir() + "/accounting.db"},
      "backup.out");
  ASSERT_EQ(taken.exit_code, 0) << taken.output;
  std::cout << taken.output;
  EXPECT_NE(taken.output.find("backup: done:"), std::string::npos) << taken.output;
  EXPECT_FALSE(load.done()) << "the copy was not taken under load";

  load.Join();
  ASSERT_EQ(WaitAllSent(services, kPayments, absl::Seconds(60)), kPayments);
  const CheckResult live = RunChecker(services);
  EXPECT_EQ(live.exit_code, 0) << live.output;

  // The copied pair is consistent on its own.
  const CheckResult copied = CheckPair(services, backup);
  ASSERT_EQ(copied.exit_code, 0) << copied.output;

  // The restore drill.
  services.recovery("r1").process.Terminate();
  ASSERT_EQ(services.payment().Terminate(), 0);
  ASSERT_EQ(services.accounting().Terminate(), 0);
  ReplaceDb(backup + "/payment.db", services.dir() + "/payment.db");
  ReplaceDb(backup + "/accounting.db", services.dir() + "/accounting.db");
  services.StartAll();
  services.StartRecovery("r2");

  std::vector<::payment::v1::Payment> restored;
  ASSERT_TRUE(PollUntil(
      [&] {
        restored = services.AllPayments();
        for (const auto& p : restored) {
          if (p.outbox().status() != ::payment::v1::SENT) return false;
        }
        return !restored.empty();
      },
      absl::Seconds(60), absl::Milliseconds(300)));
  EXPECT_LT(restored.size(), static_cast<size_t>(kPayments)) << "the copy was taken mid-load";
  EXPECT_GE(restored.size(), static_cast<size_t>(kPayments / 3));

  std::map<std::string, int> vouchers;
  for (const auto& v : services.AllVouchers()) ++vouchers[v.payment_id()];
  for (const auto& p : restored) {
    EXPECT_EQ(vouchers[p.payment_id()], 1) << p.payment_id();
  }
  EXPECT_EQ(vouchers.size(), restored.size());
  const CheckResult after = RunChecker(services);
  EXPECT_EQ(after.exit_code, 0) << after.output;

  // reconcile alone: nothing to do on a consistent pair.
  const ScriptResult again = RunScript(
      services, {"reconcile", services.dir() + "/payment.db", services.dir() + "/accounting.db"},
      "reconcile.out");
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find(": 0 SENT row(s) without a voucher"), std::string::npos)
      << again.output;
}

TEST(BackupTest, ReconcileReopensSentRowsWhoseVoucherIsGone) {
  // accounting.db restored to a point before some bookings: payment's SENT
  // rows are the ledger; reconcile puts those without a voucher back to
  // SENDING, recovery delivers them, accounting books each once.
  constexpr int kPayments = 40;
  ServiceSet services(Env{{"RECOVERY_BASE_DELAY", "500ms"},
                          {"RECOVERY_MAX_DELAY", "2s"},
                          {"RECOVERY_IDLE_SLEEP", "200ms"},
                          {"RECOVERY_LEASE_TTL", "2s"}});
  services.StartAll();
  services.StartRecovery("r1");
  const std::string early = services.dir() + "/early";
  CreatePayments(services, "early-", kPayments / 2);
  ASSERT_EQ(WaitAllSent(services, kPayments / 2, absl::Seconds(30)), kPayments / 2);
  const ScriptResult taken = RunScript(
      services,
      {"backup", early, services.dir() + "/payment.db", services.dir() + "/accounting.db"},
      "backup.out");
  ASSERT_EQ(taken.exit_code, 0) << taken.output;
  CreatePayments(services, "late-", kPayments / 2);
  ASSERT_EQ(WaitAllSent(services, kPayments, absl::Seconds(30)), kPayments);

  ASSERT_EQ(services.accounting().Terminate(), 0);
  ReplaceDb(early + "/accounting.db", services.dir() + "/accounting.db");
  const std::string payment_db = services.dir() + "/payment.db";
  {
    // Every row acknowledged on its last attempt: a reopened row must get a
    // new budget, not fail "exhausted" at its first claim.
    SQLite::Database db(payment_db, SQLite::OPEN_READWRITE);
    db.setBusyTimeout(5000);
    db.exec("UPDATE outbox SET attempts = max_attempts WHERE status = 'SENT'");
  }
  const ScriptResult reconciled = RunScript(
      services, {"reconcile", payment_db, services.dir() + "/accounting.db"}, "reconcile.out");
  ASSERT_EQ(reconciled.exit_code, 0) << reconciled.output;
  EXPECT_NE(reconciled.output.find(absl::StrCat(": ", kPayments / 2, " SENT row(s)")),
            std::string::npos)
      << reconciled.output;
  {
    // Through the state machine: attempts reset, a history event per row,
    // audited.
    SQLite::Database db(payment_db, SQLite::OPEN_READONLY);
    EXPECT_EQ(db.execAndGet("SELECT count(*) FROM outbox WHERE status = 'SENDING' AND attempts = 0")
                  .getInt(),
              kPayments / 2);
    EXPECT_EQ(
        db.execAndGet("SELECT count(*) FROM outbox_history WHERE event = 'repaired'").getInt(),
        kPayments / 2);
    EXPECT_GE(db.execAndGet("SELECT count(*) FROM outbox_audit WHERE action = 'repair' AND "
                            "dry_run = 0 AND actor LIKE '%(backup.sh)'")
                  .getInt(),
              1);
  }
  services.StartAccounting();

  ASSERT_EQ(WaitAllSent(services, kPayments, absl::Seconds(60)), kPayments);
  std::map<std::string, int> vouchers;
  for (const auto& v : services.AllVouchers()) ++vouchers[v.payment_id()];
  EXPECT_EQ(vouchers.size(), static_cast<size_t>(kPayments));
  for (const auto& [id, n] : vouchers) EXPECT_EQ(n, 1) << id;
  const CheckResult after = RunChecker(services);
  EXPECT_EQ(after.exit_code, 0) << after.output;
}

// PRAGMA integrity_check of a live file, from a read-only connection:
// "ok" or what is damaged (an index listing rows its table lost, ...).
std::string IntegrityCheck(const std::string& path) {
  auto db = OpenDatabaseReadOnly(path);
  if (!db.ok()) return std::string(db.status().message());
  std::string out;
  SQLite::Statement q(**db, "PRAGMA integrity_check");
  while (q.executeStep())
    absl::StrAppend(&out, out.empty() ? "" : "; ", q.getColumn(0).getString());
  return out;
}

// reconcile writes the live payment.db beside payment's and recovery's
// writers: again and again under load it leaves both files whole (no
// checkpoint of its own, no write lock on accounting.db), and the payments
// it reopened are booked once each.
TEST(BackupTest, ReconcileUnderLoadLeavesBothFilesWhole) {
  constexpr int kPayments = 2000;
  ServiceSet services(kFastRecovery);
  services.StartAll();
  services.StartRecovery("r1");
  PaymentLoad load(services, "reconcile-", kPayments, 4, absl::Milliseconds(2));
  ASSERT_TRUE(PollUntil([&] { return load.created() >= kPayments / 10; }, absl::Seconds(60)));
  int runs = 0;
  while (!load.done() && runs < 20) {
    const ScriptResult r = RunScript(
        services, {"reconcile", services.dir() + "/payment.db", services.dir() + "/accounting.db"},
        absl::StrCat("reconcile-", runs, ".out"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    ++runs;
  }
  std::cout << "reconcile ran " << runs << " times under load\n";
  EXPECT_GE(runs, 2) << "the load ended before reconcile could run beside it";
  load.Join();
  ASSERT_EQ(WaitAllSent(services, kPayments, absl::Seconds(120)), kPayments);
  EXPECT_EQ(IntegrityCheck(services.dir() + "/payment.db"), "ok");
  EXPECT_EQ(IntegrityCheck(services.dir() + "/accounting.db"), "ok");
  std::map<std::string, int> vouchers;
  for (const auto& v : services.AllVouchers()) ++vouchers[v.payment_id()];
  EXPECT_EQ(vouchers.size(), static_cast<size_t>(kPayments));
  for (const auto& [id, n] : vouchers) EXPECT_EQ(n, 1) << id;
  const CheckResult after = RunChecker(services);
  EXPECT_EQ(after.exit_code, 0) << after.output;
}

}  // namespace
}  // namespace outbox::testing
