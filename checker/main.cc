// outbox_check: audits payment.db and accounting.db (read-only) for broken
// outbox guarantees; either may be a PostgreSQL database instead (a
// postgresql:// URI), whose rows it copies and checks the same way
// (checker/pg_copy.h). Exit 0 = consistent, 1 = violations, 2 = usage/IO error.
// With --repair it also fixes what is safe to fix in payment.db (a dry run
// unless --apply; checker/repair.h): exit 0 = nothing left for an operator.
#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "checker/repair.h"
#include "checker/report.h"

namespace {
std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}
}  // namespace

ABSL_FLAG(std::string, payment_db, Env("PAYMENT_DB"),
          "path to payment.db, or payment's PostgreSQL database as a postgresql:// URI (the "
          "password in PGPASSFILE, never printed) (env PAYMENT_DB)");
ABSL_FLAG(std::string, accounting_db, Env("ACCOUNTING_DB"),
          "path to accounting.db, or accounting's PostgreSQL database as a postgresql:// URI; "
          "with accounting shards every shard's, comma-separated (env ACCOUNTING_DB)");
ABSL_FLAG(std::string, payment_id_prefix, Env("PAYMENT_ID_PREFIX"),
          "payment shards (one accounting for several payment dbs): only vouchers whose payment "
          "id starts with this prefix (s<shard>-, e.g. s0-) must have their payment in "
          "--payment_db; empty = all (env PAYMENT_ID_PREFIX)");
ABSL_FLAG(bool, json, false, "print one JSON object instead of the text report");
ABSL_FLAG(absl::Duration, stale_after, absl::Minutes(10),
          "a SENDING row older than this (now - created_at) is stale");
ABSL_FLAG(bool, fail_on_stale, true,
          "count stale SENDING rows as a violation (else report them only)");
ABSL_FLAG(bool, repair, false,
          "also repair what is safe in payment.db (SENT or archived rows without a voucher go "
          "back to SENDING, FAILED rows with one are closed SENT) and list what needs an "
          "operator; a dry run unless --apply");
ABSL_FLAG(bool, apply, false,
          "with --repair: change payment.db or payment's PostgreSQL database (default: a dry run)");
ABSL_FLAG(std::string, actor, "",
          "with --repair: who repairs, for outbox_audit and outbox_history (default: the OS "
          "user name)");

namespace {
// absl::ParseCommandLine exits with 1 on a bad flag and after --help, but 1
// means "violations found" here: while parsing, turn that exit into 2 (usage
// error) or 0 (help was asked for).
int g_exit_code_while_parsing = -1;
void OverrideParseExitCode() {
  if (g_exit_code_while_parsing < 0) return;
  std::cout.flush();  // _Exit skips the flush that would print --help to a pipe
  std::fflush(nullptr);
  std::_Exit(g_exit_code_while_parsing);
}
// The name of the effective user, or "uid <n>" without a passwd entry.
std::string OsUserName() {
  const uid_t uid = geteuid();
  std::string buffer(16384, '\0');
  passwd entry;
  passwd* found = nullptr;
  if (getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &found) == 0 && found != nullptr) {
    return found->pw_name;
  }
  return "uid " + std::to_string(uid);
}
bool IsHelpRequest(absl::string_view arg) {
  return absl::StartsWith(arg, "--help") || absl::StartsWith(arg, "-help") ||
         absl::StartsWith(arg, "--version") || absl::StartsWith(arg, "-version");
}
}  // namespace

int main(int argc, char** argv) {
  absl::FlagsUsageConfig usage_config;
  // --help lists only flags from files matching the program name by default.
  auto in_main = [](absl::string_view file) { return absl::EndsWith(file, "main.cc"); };
  usage_config.contains_help_flags = in_main;
  usage_config.contains_helpshort_flags = in_main;
  absl::SetFlagsUsageConfig(usage_config);
  absl::SetProgramUsageMessage(
      "Checks payment.db and accounting.db (opened read-only) for broken outbox guarantees; "
      "--repair fixes in payment.db what is safe to fix. Either may be a PostgreSQL database "
      "(postgresql://...): its rows are copied in one read-only snapshot and checked the same "
      "way.\n"
      "Usage: outbox_check --payment_db=payment.db --accounting_db=accounting.db[,shard2.db...] "
      "[--json] [--repair [--apply] [--actor=NAME]]\n"
      "Exit status: 0 consistent, 1 violations found, 2 usage or I/O error; with --repair: 0 "
      "nothing left for an operator (every violation repaired, or would be), 1 violations that "
      "need an operator.");

  bool help = false;
  for (int i = 1; i < argc; ++i) help = help || IsHelpRequest(argv[i]);
  g_exit_code_while_parsing = help ? outbox::checker::kExitOk : outbox::checker::kExitError;
  std::atexit(OverrideParseExitCode);
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  g_exit_code_while_parsing = -1;
  if (args.size() > 1) {
    std::cerr << "outbox_check: unexpected argument '" << args[1] << "' (see --help)\n";
    return outbox::checker::kExitError;
  }

  outbox::checker::CheckConfig config;
  config.payment_db = absl::GetFlag(FLAGS_payment_db);
  config.accounting_db = absl::GetFlag(FLAGS_accounting_db);
  config.stale_after = absl::GetFlag(FLAGS_stale_after);
  config.fail_on_stale = absl::GetFlag(FLAGS_fail_on_stale);
  config.payment_id_prefix = absl::GetFlag(FLAGS_payment_id_prefix);
  if (config.payment_db.empty() || config.accounting_db.empty()) {
    std::cerr << "outbox_check: --payment_db and --accounting_db (or PAYMENT_DB and "
                 "ACCOUNTING_DB) are required\n";
    return outbox::checker::kExitError;
  }
  if (config.stale_after <= absl::ZeroDuration()) {
    std::cerr << "outbox_check: --stale_after must be positive\n";
    return outbox::checker::kExitError;
  }
  if (absl::GetFlag(FLAGS_apply) && !absl::GetFlag(FLAGS_repair)) {
    std::cerr << "outbox_check: --apply needs --repair\n";
    return outbox::checker::kExitError;
  }
  if (absl::GetFlag(FLAGS_repair)) {
    outbox::checker::RepairOptions repair;
    repair.apply = absl::GetFlag(FLAGS_apply);
    repair.actor = absl::GetFlag(FLAGS_actor);
    if (repair.actor.empty()) repair.actor = OsUserName();
    return outbox::checker::RunRepairAndPrint(config, repair, absl::Now(),
                                              absl::GetFlag(FLAGS_json), std::cout, std::cerr);
  }
  return outbox::checker::RunAndPrint(config, absl::Now(), absl::GetFlag(FLAGS_json), std::cout,
                                      std::cerr);
}
