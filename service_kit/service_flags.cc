#include "service_kit/service_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "shared/base/status_macros.h"
#include "shared/observability/log.h"
#include "shared/runtime/internal/env.h"

using outbox::EnvOr;
using outbox::EnvOrDuration;
using outbox::EnvOrInt;

namespace {
// The built-in defaults: ServiceConfig's (service_config.h), its retry
// policy RetryPolicy's and its heartbeat AmqpUrl's.
const outbox::ServiceConfig& Defaults() {
  static const auto* const defaults = new outbox::ServiceConfig();
  return *defaults;
}
}  // namespace

ABSL_FLAG(std::string, amqp_url, EnvOr("AMQP_URL", ""),
          "RabbitMQ URL amqp://user:pass@host:port/vhost, or amqps://... for TLS, required "
          "[env AMQP_URL]");
ABSL_FLAG(std::string, amqp_tls_ca_file, EnvOr("AMQP_TLS_CA_FILE", ""),
          "PEM CA bundle the broker's certificate must chain to; required with amqps:// "
          "[env AMQP_TLS_CA_FILE]");
ABSL_FLAG(std::string, amqp_tls_cert_file, EnvOr("AMQP_TLS_CERT_FILE", ""),
          "PEM client certificate for brokers that verify clients; with --amqp_tls_key_file "
          "[env AMQP_TLS_CERT_FILE]");
ABSL_FLAG(std::string, amqp_tls_key_file, EnvOr("AMQP_TLS_KEY_FILE", ""),
          "PEM private key (unencrypted) of --amqp_tls_cert_file [env AMQP_TLS_KEY_FILE]");
ABSL_FLAG(std::string, amqp_password_file, EnvOr("AMQP_PASSWORD_FILE", ""),
          "file holding the password of the user in --amqp_url, read once at start; "
          "replaces a password in the URL [env AMQP_PASSWORD_FILE]");
ABSL_FLAG(absl::Duration, amqp_heartbeat,
          EnvOrDuration("AMQP_HEARTBEAT", Defaults().amqp.heartbeat),
          "AMQP heartbeat asked of the broker, whole seconds from 2s (the broker may grant "
          "less): a connection that hears nothing for two of them is taken for dead, and the "
          "broker closes one that sends nothing for two of them (docs/design.md, Noticing a "
          "dead link) [env AMQP_HEARTBEAT]");
ABSL_FLAG(std::string, pay_queue, EnvOr("PAY_QUEUE", "PAY_QUEUE"),
          "queue of the payment events [env PAY_QUEUE]");
ABSL_FLAG(std::string, acc_queue, EnvOr("ACC_QUEUE", "ACC_QUEUE"),
          "queue of accounting's acknowledgements (reply_to of payment events) [env ACC_QUEUE]");
ABSL_FLAG(int, accounting_shards, EnvOrInt("ACCOUNTING_SHARDS", Defaults().accounting_shards),
          "accounting instances M: with more than 1, payment events are hashed by payment id "
          "over the queues <pay_queue>-0..M-1, one per accounting instance; the same M for "
          "all services (docs/deployment.md, Accounting shards) [env ACCOUNTING_SHARDS]");
ABSL_FLAG(std::string, queue_type, EnvOr("QUEUE_TYPE", ""),
          "x-queue-type of declared queues, e.g. quorum; empty = classic [env QUEUE_TYPE]");
ABSL_FLAG(std::string, sqlite_synchronous, EnvOr("SQLITE_SYNCHRONOUS", "full"),
          "SQLite durability: full, normal or off [env SQLITE_SYNCHRONOUS]");
ABSL_FLAG(std::string, alertmanager_url, EnvOr("ALERTMANAGER_URL", ""),
          "Alertmanager base URL, e.g. http://127.0.0.1:9093; empty = alerts only logged "
          "[env ALERTMANAGER_URL]");
ABSL_FLAG(absl::Duration, retry_base_delay,
          EnvOrDuration("RETRY_BASE_DELAY",
                        EnvOrDuration("RECOVERY_BASE_DELAY", Defaults().retry.base_delay)),
          "linear backoff unit: a message is retried base*n after its attempt n "
          "[env RETRY_BASE_DELAY, formerly RECOVERY_BASE_DELAY]");
ABSL_FLAG(absl::Duration, retry_max_delay,
          EnvOrDuration("RETRY_MAX_DELAY",
                        EnvOrDuration("RECOVERY_MAX_DELAY", Defaults().retry.max_delay)),
          "cap of the backoff [env RETRY_MAX_DELAY, formerly RECOVERY_MAX_DELAY]");
ABSL_FLAG(int, retry_max_attempts,
          EnvOrInt("RETRY_MAX_ATTEMPTS",
                   EnvOrInt("RECOVERY_MAX_ATTEMPTS", Defaults().retry.max_attempts)),
          "publishes before a message becomes FAILED; stored in each row when it is written "
          "[env RETRY_MAX_ATTEMPTS, formerly RECOVERY_MAX_ATTEMPTS]");
ABSL_FLAG(absl::Duration, retry_max_age, EnvOrDuration("RETRY_MAX_AGE", Defaults().retry.max_age),
          "a SENDING message older than this turns FAILED (kind expired) at its next retry "
          "instead of being re-published; 0 = no limit [env RETRY_MAX_AGE]");
ABSL_FLAG(std::string, topic_retry, EnvOr("TOPIC_RETRY", ""),
          "retry policies by topic, 'TOPIC:KEY=VALUE,...;TOPIC:...' with keys base_delay, "
          "max_attempts and max_age (e.g. 'PAY_QUEUE:base_delay=2s,max_attempts=20'); a key not "
          "given takes the --retry_* value. Recovery applies a row's topic's policy at each "
          "retry, its max_attempts in place of the budget stored in the row [env TOPIC_RETRY]");
ABSL_FLAG(std::string, tls_cert_file, EnvOr("TLS_CERT_FILE", ""),
          "PEM certificate chain of the gRPC server; with --tls_key_file turns TLS on, "
          "empty = plaintext [env TLS_CERT_FILE]");
ABSL_FLAG(std::string, tls_key_file, EnvOr("TLS_KEY_FILE", ""),
          "PEM private key of --tls_cert_file [env TLS_KEY_FILE]");
ABSL_FLAG(std::string, tls_client_ca_file, EnvOr("TLS_CLIENT_CA_FILE", ""),
          "PEM CA bundle; when set, clients must present a certificate it signed (mTLS) "
          "[env TLS_CLIENT_CA_FILE]");
ABSL_FLAG(std::string, tls_ca_file, EnvOr("TLS_CA_FILE", ""),
          "PEM CA bundle --health_check trusts for the server's certificate; "
          "default --tls_client_ca_file [env TLS_CA_FILE]");

ABSL_FLAG(int64_t, max_amount_minor, EnvOrInt("MAX_AMOUNT_MINOR", Defaults().max_amount_minor),
          "largest payment amount in minor units: payment refuses larger requests "
          "(INVALID_ARGUMENT), accounting answers larger messages with a business reject "
          "(dead-letters them from a publisher older than rejects) [env MAX_AMOUNT_MINOR]");

ABSL_FLAG(std::string, message_keys_file, EnvOr("MESSAGE_KEYS_FILE", ""),
          "file of '<key id> <secret>' lines shared by the three services: messages are "
          "signed with the first key and accepted when signed by any; required unless "
          "--allow_unsigned_messages [env MESSAGE_KEYS_FILE]");
ABSL_FLAG(bool, allow_unsigned_messages, EnvOr("ALLOW_UNSIGNED_MESSAGES", "") == "true",
          "run without --message_keys_file: messages are sent unsigned and accepted unsigned, so "
          "anyone who can publish to the broker can forge payments and acknowledgements "
          "[env ALLOW_UNSIGNED_MESSAGES=true]");

// No environment default, unlike every other flag: an inherited variable
// would turn the service itself into a probe.
ABSL_FLAG(std::string, health_check, "",
          "probe mode for container healthchecks: ask host:port for grpc.health.v1.Health/Check "
          "(2 s deadline) and exit 0 if SERVING, 1 otherwise, without starting the service; "
          "TLS when --tls_cert_file is set (see --tls_ca_file)");

namespace outbox {
namespace {

absl::StatusOr<std::optional<MessageKeys>> MessageKeysFromFlags() {
  const std::string path = absl::GetFlag(FLAGS_message_keys_file);
  if (path.empty()) {
    if (!absl::GetFlag(FLAGS_allow_unsigned_messages)) {
      return absl::InvalidArgumentError(
          "--message_keys_file (or MESSAGE_KEYS_FILE) is required; --allow_unsigned_messages "
          "only for a broker nobody else can publish to");
    }
    LogWarning(
        "messages_unsigned",
        {KV("warning", "--allow_unsigned_messages: messages are neither signed nor checked")});
    return std::nullopt;
  }
  std::string warning;
  ASSIGN_OR_RETURN(std::string text, ReadTokenFile(path, "message_keys_file", &warning));
  if (!warning.empty()) LogWarning("message_keys_file_too_open", {KV("warning", warning)});
  auto keys = MessageKeys::Parse(text);
  if (!keys.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--message_keys_file: '", path, "' ", keys.status().message()));
  }
  return *std::move(keys);
}

}  // namespace

absl::StatusOr<ServiceConfig> ServiceConfigFromFlags() {
  ServiceConfig c;
  if (absl::GetFlag(FLAGS_amqp_url).empty()) {
    return absl::InvalidArgumentError("--amqp_url (or AMQP_URL) is required");
  }
  ASSIGN_OR_RETURN(c.amqp, AmqpUrl::Parse(absl::GetFlag(FLAGS_amqp_url),
                                          {absl::GetFlag(FLAGS_amqp_tls_ca_file),
                                           absl::GetFlag(FLAGS_amqp_tls_cert_file),
                                           absl::GetFlag(FLAGS_amqp_tls_key_file)}));
  if (const std::string path = absl::GetFlag(FLAGS_amqp_password_file); !path.empty()) {
    RETURN_IF_ERROR(c.amqp.ReadPasswordFile(path));
  }
  c.amqp.heartbeat = absl::GetFlag(FLAGS_amqp_heartbeat);
  RETURN_IF_ERROR(AmqpUrl::CheckHeartbeat(c.amqp.heartbeat, "amqp_heartbeat"));
  c.pay_queue = absl::GetFlag(FLAGS_pay_queue);
  c.acc_queue = absl::GetFlag(FLAGS_acc_queue);
  if (c.pay_queue.empty() || c.acc_queue.empty() || c.pay_queue == c.acc_queue) {
    return absl::InvalidArgumentError("--pay_queue and --acc_queue must be two different names");
  }
  c.queue_type = absl::GetFlag(FLAGS_queue_type);
  c.accounting_shards = absl::GetFlag(FLAGS_accounting_shards);
  if (c.accounting_shards < 1 || c.accounting_shards > kMaxAccountingShards) {
    return absl::InvalidArgumentError(
        absl::StrCat("--accounting_shards must be 1..", kMaxAccountingShards));
  }
  ASSIGN_OR_RETURN(c.db.durability, ParseDurability(absl::GetFlag(FLAGS_sqlite_synchronous)));
  c.retry.base_delay = absl::GetFlag(FLAGS_retry_base_delay);
  c.retry.max_delay = absl::GetFlag(FLAGS_retry_max_delay);
  c.retry.max_attempts = absl::GetFlag(FLAGS_retry_max_attempts);
  c.retry.max_age = absl::GetFlag(FLAGS_retry_max_age);
  {
    auto topics = ParseTopicRetry(absl::GetFlag(FLAGS_topic_retry), c.retry);
    if (!topics.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--topic_retry: ", topics.status().message()));
    }
    c.retry.topics = *std::move(topics);
  }
  absl::Status s = c.retry.Validate();
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat("--retry_*: ", s.message()));
  c.alertmanager_url = absl::GetFlag(FLAGS_alertmanager_url);
  c.max_amount_minor = absl::GetFlag(FLAGS_max_amount_minor);
  if (c.max_amount_minor < 1) return absl::InvalidArgumentError("--max_amount_minor must be >= 1");
  c.tls = {absl::GetFlag(FLAGS_tls_cert_file), absl::GetFlag(FLAGS_tls_key_file),
           absl::GetFlag(FLAGS_tls_client_ca_file)};
  RETURN_IF_ERROR(ServerCredentialsFrom(c.tls).status());
  ASSIGN_OR_RETURN(c.message_keys, MessageKeysFromFlags());
  return c;
}

TlsClientFiles HealthProbeTlsFromFlags() {
  TlsClientFiles probe;
  if (absl::GetFlag(FLAGS_tls_cert_file).empty()) return probe;  // plaintext server
  probe.ca_file = absl::GetFlag(FLAGS_tls_ca_file);
  if (probe.ca_file.empty()) probe.ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  if (!absl::GetFlag(FLAGS_tls_client_ca_file).empty()) {
    probe.cert_file = absl::GetFlag(FLAGS_tls_cert_file);
    probe.key_file = absl::GetFlag(FLAGS_tls_key_file);
  }
  return probe;
}

HealthCheckRequest HealthCheckFromFlags() {
  return {absl::GetFlag(FLAGS_health_check), HealthProbeTlsFromFlags()};
}

}  // namespace outbox
