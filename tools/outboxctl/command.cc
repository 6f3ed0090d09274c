#include "tools/outboxctl/command.h"

#include <map>
#include <optional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "service_kit/cli.h"

namespace outbox::ctl {
namespace {

struct FlagSpec {
  absl::string_view name;
  bool takes_value;
  bool global;  // applies to every command
};

constexpr FlagSpec kFlags[] = {
    {"recovery_addr", true, true},   {"payment_addr", true, true},
    {"accounting_addr", true, true}, {"timeout", true, true},
    {"json", false, true},           {"status", true, false},
    {"limit", true, false},          {"page_size", true, false},
    {"queue", true, false},          {"all_failed", false, false},
    {"dry_run", false, false},       {"tls_ca_file", true, true},
    {"tls_cert_file", true, true},   {"tls_key_file", true, true},
    {"token_file", true, true},      {"idempotency_key", true, false},
    {"payer", true, false},          {"payee", true, false},
    {"amount", true, false},         {"currency", true, false},
    {"description", true, false},    {"group", true, false},
    {"kind", true, false},           {"include_rejected_and_acknowledged", false, false},
    {"reason", true, false},
};

const FlagSpec* FindFlag(absl::string_view name) {
  for (const FlagSpec& f : kFlags) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

absl::Status Bad(absl::string_view message) {
  return absl::InvalidArgumentError(message);
}

// How a flag is written in messages: --all-failed, --recovery_addr (as in the help).
std::string Shown(absl::string_view name) {
  if (name == "all_failed" || name == "dry_run" || name == "include_rejected_and_acknowledged") {
    return absl::StrCat("--", absl::StrReplaceAll(name, {{"_", "-"}}));
  }
  return absl::StrCat("--", name);
}

absl::StatusOr<int> PositiveInt(absl::string_view flag, const std::string& value, int max) {
  int n = 0;
  if (!absl::SimpleAtoi(value, &n) || n < 1 || n > max) {
    return Bad(absl::StrCat(Shown(flag), " must be a whole number from 1 to ", max, ", not '",
                            value, "'"));
  }
  return n;
}

absl::StatusOr<absl::Duration> PositiveDuration(absl::string_view what, const std::string& value) {
  absl::Duration d;
  if (!absl::ParseDuration(value, &d) || d <= absl::ZeroDuration()) {
    return Bad(
        absl::StrCat(what, " must be a positive duration such as 500ms or 10s, not '", value, "'"));
  }
  return d;
}

// The flags each command takes besides the global ones.
const std::set<std::string>& LocalFlagsOf(Verb verb) {
  static const auto* none = new std::set<std::string>();
  static const auto* list = new std::set<std::string>{"status", "limit", "page_size"};
  static const auto* one_row = new std::set<std::string>{"reason"};
  static const auto* redrive_all = new std::set<std::string>{
      "all_failed", "dry_run", "include_rejected_and_acknowledged", "reason"};
  static const auto* by_group = new std::set<std::string>{"group", "dry_run", "reason"};
  static const auto* failures = new std::set<std::string>{"kind", "limit"};
  static const auto* audit = new std::set<std::string>{"limit"};
  static const auto* dead_letters = new std::set<std::string>{"queue", "limit"};
  static const auto* dead_letters_redrive = new std::set<std::string>{"queue", "limit", "reason"};
  static const auto* create = new std::set<std::string>{
      "idempotency_key", "payer", "payee", "amount", "currency", "description"};
  switch (verb) {
    case Verb::kPaymentCreate: return *create;
    case Verb::kList: return *list;
    case Verb::kRedrive:
    case Verb::kAcknowledge: return *one_row;
    case Verb::kRedriveAllFailed: return *redrive_all;
    case Verb::kRedriveGroup:
    case Verb::kAcknowledgeGroup: return *by_group;
    case Verb::kFailures: return *failures;
    case Verb::kAudit: return *audit;
    case Verb::kDeadLettersList: return *dead_letters;
    case Verb::kDeadLettersRedrive: return *dead_letters_redrive;
    default: return *none;
  }
}

// The command named by the words, and how many words after its name it takes.
absl::StatusOr<Verb> VerbOf(const std::vector<std::string>& words, bool all_failed, bool group,
                            size_t* name_words, size_t* args) {
  const std::string& w = words[0];
  *name_words = 1;
  *args = 0;
  if (w == "stats") return Verb::kStats;
  if (w == "list") return Verb::kList;
  if (w == "help") return Verb::kHelp;
  if (w == "version") return Verb::kVersion;
  if (w == "get") {
    *args = 1;
    return Verb::kGet;
  }
  if (w == "redrive") {
    if (all_failed && group) return Bad("redrive takes --all-failed or --group, not both");
    if (all_failed) return Verb::kRedriveAllFailed;
    if (group) return Verb::kRedriveGroup;
    *args = 1;
    return Verb::kRedrive;
  }
  if (w == "acknowledge") {
    if (group) return Verb::kAcknowledgeGroup;
    *args = 1;
    return Verb::kAcknowledge;
  }
  if (w == "failures") return Verb::kFailures;
  if (w == "audit") return Verb::kAudit;
  if (w == "policy") return Verb::kPolicy;
  if (w == "history") {
    *args = 1;
    return Verb::kHistory;
  }
  if (w == "health") {
    *args = 1;
    return Verb::kHealth;
  }
  if (w == "dead-letters" || w == "dead_letters" || w == "payment" || w == "voucher") {
    *name_words = 2;
    const std::string sub = words.size() > 1 ? words[1] : "";
    if (w == "payment" && sub == "create") return Verb::kPaymentCreate;
    if (w == "payment" || w == "voucher") {
      if (sub != "get") {
        return Bad(sub.empty()
                       ? absl::StrCat("'", w, "' needs a subcommand: ", w, " get PAYMENT_ID",
                                      w == "payment" ? " or payment create" : "")
                       : absl::StrCat("unknown subcommand '", w, " ", sub, "'; try '", w,
                                      w == "payment" ? " get PAYMENT_ID' or 'payment create'"
                                                     : " get PAYMENT_ID'"));
      }
      *args = 1;
      return w == "payment" ? Verb::kPaymentGet : Verb::kVoucherGet;
    }
    if (sub == "list") return Verb::kDeadLettersList;
    if (sub == "redrive") return Verb::kDeadLettersRedrive;
    return Bad(sub.empty() ? "'dead-letters' needs a subcommand: list or redrive"
                           : absl::StrCat("unknown subcommand 'dead-letters ", sub,
                                          "'; try list or redrive"));
  }
  return Bad(absl::StrCat("unknown command '", w, "'"));
}

const char* ArgName(Verb verb) {
  switch (verb) {
    case Verb::kGet:
    case Verb::kRedrive:
    case Verb::kAcknowledge: return "MESSAGE_ID";
    case Verb::kHistory: return "MESSAGE_ID|BUSINESS_KEY";
    case Verb::kPaymentGet:
    case Verb::kVoucherGet: return "PAYMENT_ID";
    case Verb::kHealth: return "ADDR";
    default: return "";
  }
}

using LocalFlags = std::map<std::string, std::string>;  // flag -> value, the last one given

bool IsTrue(const LocalFlags& local, const std::string& name) {
  auto it = local.find(name);
  return it != local.end() && it->second == "true";
}

// --help (-h) and --version before any "--" win over everything else.
std::optional<Verb> HelpOrVersion(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--") break;
    if (a == "-h" || a == "-help" || a == "--help") return Verb::kHelp;
    if (a == "-version" || a == "--version") return Verb::kVersion;
  }
  return std::nullopt;
}

// The global flags' values before the command line: the environment's, else built in.
absl::StatusOr<Command> Defaults(const EnvLookup& env) {
  Command c;
  c.recovery_addr = env("RECOVERY_ADDR").value_or("127.0.0.1:50053");
  c.payment_addr = env("PAYMENT_ADDR").value_or("127.0.0.1:50051");
  c.accounting_addr = env("ACCOUNTING_ADDR").value_or("127.0.0.1:50052");
  c.timeout = absl::Seconds(10);
  c.tls_ca_file = env("OUTBOXCTL_TLS_CA_FILE").value_or("");
  c.tls_cert_file = env("OUTBOXCTL_TLS_CERT_FILE").value_or("");
  c.tls_key_file = env("OUTBOXCTL_TLS_KEY_FILE").value_or("");
  c.token_file = env("OUTBOXCTL_TOKEN_FILE").value_or("");
  if (auto t = env("OUTBOXCTL_TIMEOUT")) {
    auto d = PositiveDuration("OUTBOXCTL_TIMEOUT", *t);
    if (!d.ok()) return d.status();
    c.timeout = *d;
  }
  return c;
}

// One flag as written: its spec, its name ('-' read as '_') and its value
// ("true" or "false" for a boolean).
struct FlagArg {
  const FlagSpec* spec = nullptr;
  std::string name;
  std::string value;
};

// Reads the flag at args[*i]; when its value is the next argument, *i moves on to it.
absl::StatusOr<FlagArg> ReadFlag(const std::vector<std::string>& args, size_t* i) {
  absl::string_view body = args[*i];
  body.remove_prefix(body.substr(0, 2) == "--" ? 2 : 1);
  const size_t eq = body.find('=');
  const std::string written(body.substr(0, eq));
  FlagArg f;
  f.name = absl::StrReplaceAll(written, {{"-", "_"}});
  f.spec = FindFlag(f.name);
  if (f.spec == nullptr) return Bad(absl::StrCat("unknown flag --", written));
  if (f.spec->takes_value) {
    if (eq != absl::string_view::npos) {
      f.value = std::string(body.substr(eq + 1));
    } else if (*i + 1 < args.size()) {
      f.value = args[++*i];
    }
    if (f.value.empty()) return Bad(absl::StrCat(Shown(f.name), " needs a value"));
  } else {
    f.value = eq == absl::string_view::npos ? "true" : std::string(body.substr(eq + 1));
    if (f.value != "true" && f.value != "false") {
      return Bad(
          absl::StrCat(Shown(f.name), " takes no value (or true/false), not '", f.value, "'"));
    }
  }
  return f;
}

// The global flags that are plain strings, and the field each sets.
using StringField = std::string Command::*;
struct StringFlag {
  absl::string_view name;
  StringField field;
};
constexpr StringFlag kStringFlags[] = {
    {"recovery_addr", &Command::recovery_addr},     {"payment_addr", &Command::payment_addr},
    {"accounting_addr", &Command::accounting_addr}, {"tls_ca_file", &Command::tls_ca_file},
    {"tls_cert_file", &Command::tls_cert_file},     {"tls_key_file", &Command::tls_key_file},
    {"token_file", &Command::token_file},
};

absl::Status SetGlobal(const FlagArg& flag, Command& c) {
  for (const StringFlag& f : kStringFlags) {
    if (f.name == flag.name) {
      c.*f.field = flag.value;
      return absl::OkStatus();
    }
  }
  if (flag.name == "json") {
    c.json = flag.value == "true";
  } else if (flag.name == "timeout") {
    auto d = PositiveDuration("--timeout", flag.value);
    if (!d.ok()) return d.status();
    c.timeout = *d;
  }
  return absl::OkStatus();
}

// The command line taken apart: global flags are set on the command as they
// come; the words and the command's own flags are kept.
struct Scanned {
  std::vector<std::string> words;
  LocalFlags local;
};

absl::StatusOr<Scanned> Scan(const std::vector<std::string>& args, Command& c) {
  Scanned s;
  bool only_words = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (!only_words && a == "--") {
      only_words = true;
      continue;
    }
    if (only_words || a.size() < 2 || a[0] != '-') {
      s.words.push_back(a);
      continue;
    }
    absl::StatusOr<FlagArg> flag = ReadFlag(args, &i);
    if (!flag.ok()) return flag.status();
    if (!flag->spec->global) {
      s.local[flag->name] = flag->value;
    } else if (absl::Status set = SetGlobal(*flag, c); !set.ok()) {
      return set;
    }
  }
  return s;
}

// Sets the verb and its argument from the words; `command` is the command's
// name as written (e.g. "dead-letters list"), for messages.
absl::Status SetVerb(const std::vector<std::string>& words, const LocalFlags& local, Command& c,
                     std::string* command) {
  if (words.empty()) return Bad("missing command");
  size_t name_words = 0, wanted = 0;
  auto verb =
      VerbOf(words, IsTrue(local, "all_failed"), local.count("group") > 0, &name_words, &wanted);
  if (!verb.ok()) return verb.status();
  c.verb = *verb;
  *command = absl::StrJoin(words.begin(), words.begin() + name_words, " ");
  const size_t given = words.size() - name_words;
  if ((c.verb == Verb::kRedriveAllFailed || c.verb == Verb::kRedriveGroup ||
       c.verb == Verb::kAcknowledgeGroup) &&
      given > 0) {
    return Bad(absl::StrCat(*command, " takes a MESSAGE_ID or ",
                            c.verb == Verb::kRedriveAllFailed ? "--all-failed" : "--group",
                            ", not both"));
  }
  if (given < wanted) {
    return Bad(absl::StrCat("'", *command, "' needs ", ArgName(c.verb),
                            c.verb == Verb::kRedrive ? " (or --all-failed)" : ""));
  }
  if (given > wanted) {
    return Bad(absl::StrCat("unexpected argument '", words[name_words + wanted], "' after '",
                            *command, wanted > 0 ? " " : "", wanted > 0 ? ArgName(c.verb) : "",
                            "'"));
  }
  if (wanted == 1) c.arg = words[name_words];
  return absl::OkStatus();
}

// Every flag given is one the command takes.
absl::Status CheckLocalFlags(const LocalFlags& local, Verb verb, const std::string& command) {
  if (local.count("dry_run") && verb != Verb::kRedriveAllFailed && verb != Verb::kRedriveGroup &&
      verb != Verb::kAcknowledgeGroup) {
    return Bad("--dry-run goes with redrive --all-failed, redrive --group or acknowledge --group");
  }
  for (const auto& [name, value] : local) {
    if (LocalFlagsOf(verb).count(name) == 0) {
      return Bad(absl::StrCat(Shown(name), " does not apply to '", command, "'"));
    }
  }
  return absl::OkStatus();
}

absl::Status SetListFlags(const LocalFlags& local, Command& c) {
  if (local.count("status") == 0) return Bad("'list' needs --status=FAILED, SENDING or SENT");
  c.status = absl::AsciiStrToUpper(local.at("status"));
  if (c.status != "FAILED" && c.status != "SENDING" && c.status != "SENT") {
    return Bad(
        absl::StrCat("--status must be FAILED, SENDING or SENT, not '", local.at("status"), "'"));
  }
  c.limit = kDefaultListLimit;
  if (local.count("limit")) {
    auto n = PositiveInt("limit", local.at("limit"), 1000000000);
    if (!n.ok()) return n.status();
    c.limit = *n;
  }
  if (local.count("page_size")) {
    auto n = PositiveInt("page_size", local.at("page_size"), kMaxPageSize);
    if (!n.ok()) return n.status();
    c.page_size = *n;
  }
  return absl::OkStatus();
}

absl::Status SetDeadLetterFlags(const LocalFlags& local, const std::string& command, Command& c) {
  if (local.count("queue") == 0) {
    return Bad(absl::StrCat("'", command, "' needs --queue=QUEUE (e.g. PAY_QUEUE)"));
  }
  c.queue = local.at("queue");
  if (local.count("limit")) {
    auto n = PositiveInt("limit", local.at("limit"),
                         c.verb == Verb::kDeadLettersList ? kMaxPageSize : 1000000000);
    if (!n.ok()) return n.status();
    c.limit = *n;
  }
  return absl::OkStatus();
}

absl::Status SetPaymentFlags(const LocalFlags& local, NewPayment& p) {
  for (const char* required : {"idempotency_key", "payer", "payee", "amount", "currency"}) {
    if (local.count(required) == 0) {
      return Bad(absl::StrCat("'payment create' needs ", Shown(required)));
    }
  }
  p.idempotency_key = local.at("idempotency_key");
  p.payer = local.at("payer");
  p.payee = local.at("payee");
  p.currency = local.at("currency");
  p.description = local.count("description") ? local.at("description") : "";
  // The range is payment_service's to judge (MAX_AMOUNT_MINOR); here only
  // that it is a whole number.
  if (!absl::SimpleAtoi(local.at("amount"), &p.amount_minor)) {
    return Bad(absl::StrCat("--amount must be a whole number of minor units (cents), not '",
                            local.at("amount"), "'"));
  }
  return absl::OkStatus();
}

// The command's own flags, checked and set.
absl::Status SetLocalFlags(const LocalFlags& local, const std::string& command, Command& c) {
  if (local.count("reason")) c.reason = local.at("reason");  // the ops API judges it
  switch (c.verb) {
    case Verb::kList: return SetListFlags(local, c);
    case Verb::kRedriveAllFailed:
      c.dry_run = IsTrue(local, "dry_run");
      c.include_rejected_and_acknowledged = IsTrue(local, "include_rejected_and_acknowledged");
      break;
    case Verb::kRedriveGroup:
    case Verb::kAcknowledgeGroup:
      c.dry_run = IsTrue(local, "dry_run");
      c.group = local.at("group");
      break;
    case Verb::kFailures:
      c.kind = local.count("kind") ? local.at("kind") : "";
      if (!c.kind.empty() && c.kind != "exhausted" && c.kind != "rejected" && c.kind != "expired") {
        return Bad(
            absl::StrCat("--kind must be exhausted, rejected or expired, not '", c.kind, "'"));
      }
      [[fallthrough]];
    case Verb::kAudit:
      if (local.count("limit")) {
        auto n = PositiveInt("limit", local.at("limit"), kMaxPageSize);
        if (!n.ok()) return n.status();
        c.limit = *n;
      }
      break;
    case Verb::kDeadLettersList:
    case Verb::kDeadLettersRedrive: return SetDeadLetterFlags(local, command, c);
    case Verb::kPaymentCreate: return SetPaymentFlags(local, c.payment);
    default: break;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Command> ParseCommand(const std::vector<std::string>& args, const EnvLookup& env) {
  if (std::optional<Verb> verb = HelpOrVersion(args)) return Command{*verb};
  absl::StatusOr<Command> c = Defaults(env);
  if (!c.ok()) return c.status();
  absl::StatusOr<Scanned> scanned = Scan(args, *c);
  if (!scanned.ok()) return scanned.status();
  std::string command;
  absl::Status s = SetVerb(scanned->words, scanned->local, *c, &command);
  if (s.ok()) s = CheckLocalFlags(scanned->local, c->verb, command);
  if (s.ok()) s = SetLocalFlags(scanned->local, command, *c);
  if (!s.ok()) return s;
  return c;
}

std::string HelpText() {
  return absl::StrCat(
      UsageLine(kProgram, kSynopsis), "\n",
      "The operator's client of the outbox services over gRPC: recovery_service's ops API,\n"
      "payments, vouchers and health checks. Tables by default, protobuf JSON with --json.\n"
      "\n"
      "commands:\n"
      "  stats                             rows by status, oldest SENDING, lease, hold, totals\n"
      "  list --status=FAILED|SENDING|SENT [--limit N] [--page_size N]\n"
      "                                    rows with that status, oldest first, paging through\n"
      "                                    (at most N rows, default 100; N per call, default 100)\n"
      "  get MESSAGE_ID                    one outbox row with every field\n"
      "  redrive MESSAGE_ID [--reason R]   a FAILED row back to SENDING, attempts reset\n"
      "  redrive --all-failed [--dry-run] [--include-rejected-and-acknowledged] [--reason R]\n"
      "                                    every FAILED row back to SENDING but those rejected by\n"
      "                                    their consumer or acknowledged (left FAILED on\n"
      "                                    purpose), unless asked; --dry-run counts\n"
      "  redrive --group=G [--dry-run] [--reason R]\n"
      "                                    the FAILED rows of failure group G, in pages\n"
      "  failures [--kind K] [--limit N]   FAILED rows grouped by how they failed (topic, kind,\n"
      "                                    error shape), largest first; K: exhausted, rejected,\n"
      "                                    expired\n"
      "  acknowledge MESSAGE_ID [--reason R]\n"
      "                                    seen, leave it FAILED: its alert stops\n"
      "  acknowledge --group=G [--dry-run] [--reason R]\n"
      "                                    the same for every row of group G\n"
      "  history MESSAGE_ID|BUSINESS_KEY   what happened to one message, as a timeline\n"
      "  audit [--limit N]                 operator actions, newest first (default 100)\n"
      "  policy                            the retry policy recovery applies, per topic\n"
      "  dead-letters list --queue=Q [--limit N]\n"
      "                                    messages parked in Q.DLQ (default 100, at most 1000)\n"
      "  dead-letters redrive --queue=Q [--limit N] [--reason R]\n"
      "                                    moves them back to Q (default all)\n"
      "  payment create --idempotency_key K --payer A --payee B --amount MINOR --currency C\n"
      "                 [--description D]  a payment (payment_service); the same key and request\n"
      "                                    again replays it (\"replayed\"), never pays twice\n"
      "  payment get PAYMENT_ID            a payment and its outbox state (payment_service)\n"
      "  voucher get PAYMENT_ID            the voucher booked for it (accounting_service)\n"
      "  health ADDR                       grpc.health.v1 Check; exit 0 only when SERVING\n"
      "\n"
      "--reason R: why, in a few words (one line, at most 500 bytes); the audit trail keeps it\n"
      "with who did what.\n"
      "\n"
      "flags (anywhere on the line; --name=value or --name value):\n"
      "  --recovery_addr HOST:PORT    recovery_service [env RECOVERY_ADDR] (127.0.0.1:50053)\n"
      "  --payment_addr HOST:PORT     payment_service [env PAYMENT_ADDR] (127.0.0.1:50051)\n"
      "  --accounting_addr HOST:PORT  accounting_service [env ACCOUNTING_ADDR] (127.0.0.1:50052)\n"
      "  --timeout DURATION           deadline of each call, e.g. 500ms [env OUTBOXCTL_TIMEOUT] "
      "(10s)\n"
      "  --json                       the response as protobuf JSON (proto field names, zeros "
      "shown)\n"
      "  --tls_ca_file FILE           PEM CA of the servers' certificates; set = TLS\n"
      "                               [env OUTBOXCTL_TLS_CA_FILE]\n"
      "  --tls_cert_file FILE         PEM client certificate, for servers requiring one (mTLS)\n"
      "                               [env OUTBOXCTL_TLS_CERT_FILE]\n"
      "  --tls_key_file FILE          its PEM key [env OUTBOXCTL_TLS_KEY_FILE]\n"
      "  --token_file FILE            token sent as 'authorization: Bearer' on every call\n"
      "                               (OPS_TOKEN_FILE's for the ops API) [env "
      "OUTBOXCTL_TOKEN_FILE]\n"
      "  --help, --version\n"
      "\n"
      "exit status: 0 done; 1 the call failed (not found, refused, unavailable, not SERVING):\n"
      "one line on stderr naming the gRPC status; 2 usage error (also an unusable TLS or token "
      "file).\n");
}

}  // namespace outbox::ctl
