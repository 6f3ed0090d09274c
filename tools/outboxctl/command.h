#pragma once

// outboxctl's command line: the words and flags of one invocation parsed into
// a Command, with the environment supplying the flags' defaults. No gRPC
// here, so every rule of the grammar is unit-tested.
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace outbox::ctl {

inline constexpr char kProgram[] = "outboxctl";
inline constexpr char kSynopsis[] = "[flags] <command> [args]";

enum class Verb {
  kHelp,
  kVersion,
  kStats,               // stats
  kList,                // list --status=S [--limit N] [--page_size N]
  kGet,                 // get MESSAGE_ID
  kRedrive,             // redrive MESSAGE_ID [--reason R]
  kRedriveAllFailed,    // redrive --all-failed [--dry-run] [--reason R]
  kRedriveGroup,        // redrive --group=G [--dry-run] [--reason R]
  kFailures,            // failures [--kind K] [--limit N]
  kAcknowledge,         // acknowledge MESSAGE_ID [--reason R]
  kAcknowledgeGroup,    // acknowledge --group=G [--dry-run] [--reason R]
  kHistory,             // history MESSAGE_ID|BIZ_KEY
  kAudit,               // audit [--limit N]
  kPolicy,              // policy
  kDeadLettersList,     // dead-letters list --queue=Q [--limit N]
  kDeadLettersRedrive,  // dead-letters redrive --queue=Q [--limit N] [--reason R]
  kPaymentGet,          // payment get PAYMENT_ID
  kPaymentCreate,  // payment create --idempotency_key K --payer A --payee B --amount N --currency C
  kVoucherGet,     // voucher get PAYMENT_ID
  kHealth,         // health ADDR
};

// payment create: the CreatePayment request.
struct NewPayment {
  std::string idempotency_key;  // --idempotency_key: the same key again replays, never books twice
  std::string payer;            // --payer
  std::string payee;            // --payee
  int64_t amount_minor = 0;     // --amount, minor units (cents)
  std::string currency;         // --currency, ISO 4217
  std::string description;      // --description, optional
};

struct Command {
  Verb verb = Verb::kHelp;
  std::string recovery_addr;    // --recovery_addr, RECOVERY_ADDR, 127.0.0.1:50053
  std::string payment_addr;     // --payment_addr, PAYMENT_ADDR, 127.0.0.1:50051
  std::string accounting_addr;  // --accounting_addr, ACCOUNTING_ADDR, 127.0.0.1:50052
  absl::Duration timeout;       // --timeout, OUTBOXCTL_TIMEOUT, 10s: each call's deadline
  bool json = false;            // --json: protobuf JSON instead of tables
  std::string arg;              // MESSAGE_ID, PAYMENT_ID or the health check's ADDR
  std::string status;           // list: SENDING, SENT or FAILED
  int limit = 0;                // list: rows wanted (100); dead letters: 0 = the default
  int page_size = 100;          // list: rows per call (at most 1000)
  bool include_rejected_and_acknowledged = false;  // redrive --all-failed
  bool dry_run = false;       // redrive --all-failed or --group, acknowledge --group
  std::string group;          // redrive, acknowledge: a failure group's id
  std::string kind;           // failures: exhausted, rejected or expired
  std::string queue;          // dead-letters: PAY_QUEUE or ACC_QUEUE (the service's names)
  std::string reason;         // redrive, acknowledge, dead-letters redrive: why, for the audit
  std::string tls_ca_file;    // --tls_ca_file, OUTBOXCTL_TLS_CA_FILE: set = TLS
  std::string tls_cert_file;  // --tls_cert_file, OUTBOXCTL_TLS_CERT_FILE: client cert (mTLS)
  std::string tls_key_file;   // --tls_key_file, OUTBOXCTL_TLS_KEY_FILE
  std::string token_file;     // --token_file, OUTBOXCTL_TOKEN_FILE: bearer token on every call
  NewPayment payment;         // payment create
};

inline constexpr int kDefaultListLimit = 100;
inline constexpr int kMaxPageSize = 1000;

// Reads an environment variable; nullopt when unset or empty.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// `args` are argv[1..]. Flags may stand anywhere, as --name=value or
// --name value (booleans take no value); '-' and '_' are the same in flag
// names. --help (-h) and --version win over anything else. INVALID_ARGUMENT
// with one sentence for an unknown command or flag, a missing, extra or bad
// argument, or a flag the command does not take.
absl::StatusOr<Command> ParseCommand(const std::vector<std::string>& args, const EnvLookup& env);

// The --help text: the usage line, commands, flags, exit codes.
std::string HelpText();

}  // namespace outbox::ctl
